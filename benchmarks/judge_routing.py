"""What the hallucination filter's judge (``--judge``) is asked on the dev labels, and the most it could change (#42).

    PYTHONPATH=src python benchmarks/judge_routing.py [--shared ../shared] [--split tune]

No judge model runs here (no weights ship with capaudit; the packaged gemma 270m is a base
model, plumbing only), so what a real judge would change is NOT measured. What is measured,
offline and exactly: which sentences reach the judge under each option (its cost), and the
bracket any judge's answers must fall in, from two scripted judges on the loopback server
(``capaudit.enrich.testing``): one that answers ``yes`` to everything (the filter decides as
without a judge) and one that answers ``no`` to everything (every asked sentence flagged:
the highest recall a judge can reach through these sentences, at the lowest precision).
Caption level on the FaithScore answers of the split's images (benchmarks/dev_set_table.py's
split: ``tune`` = the 20 images not held out), through the Python API, in a fresh store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dev_set_table as dev  # noqa: E402

ROWS = [("chair-gt, visual, --judge undecided", {"object_mode": "visual", "judge": "undecided"}),
        ("chair-gt + references, visual, --judge undecided",
         {"object_mode": "visual", "judge": "undecided", "refs": True}),
        ("chair-gt, corrected (default), --judge kept",
         {"object_mode": "corrected", "judge": "kept"})]


def run(shared: Path, split: str, work: Path) -> list[dict]:
    import capaudit
    from capaudit.enrich.testing import FakeOpenAIServer

    os.environ["CAPAUDIT_CACHE_DIR"] = str(work / "cache")   # never the user's cache
    records = [json.loads(line) for line in shared.joinpath(*dev.LABELS).read_text().splitlines()]
    images = {r["id"] for r in records}
    chosen = images if split == "all" else set(dev.image_split(images)[split])
    src = work / "set.jsonl"
    src.write_text("".join(json.dumps({"image_id": int(r["id"]), "caption": r["answer"]})
                           + "\n" for r in records if r["id"] in chosen))
    labels = dev._labels_for(records, chosen, work / "labels.jsonl")
    refs = str(dev.write_references(shared, {int(i) for i in images}, work / "refs.jsonl"))
    store = capaudit.open(work / "j.duckdb")
    store.add_set("fs", src)
    out = []
    for i, (name, row) in enumerate(ROWS):
        opts = {k: v for k, v in row.items() if k != "refs"}
        if row.get("refs"):
            opts["references"] = refs
        res = {"row": name}
        for answer in ("yes", "no"):
            os.environ["CAPAUDIT_CACHE_DIR"] = str(work / f"cache-{answer}")
            with FakeOpenAIServer(answer=lambda body, a=answer: a + "\n") as srv:
                _, summary = store.filter("fs", "hallucination", f"f{i}{answer}", action="flag",
                                          chair_gt=str(shared.joinpath(*dev.CHAIR_GT)),
                                          judge_url=srv.base_url, **opts)
            v = store.validate_filter(labels, f"f{i}{answer}", n_boot=0)
            res[answer] = {k: v["caption"][k] for k in ("precision", "recall", "counts")}
        j = summary.extra["judge"]
        res.update(sentences_in=summary.sentences_in, asked=j["sentences"],
                   questions=j["questions"], captions=summary.captions_in)
        out.append(res)
    return out


def markdown(rows: list[dict]) -> str:
    lines = ["| option | sentences asked (of all) | judge says yes to all: P / R (tp fp fn) | "
             "judge says no to all: P / R (tp fp fn) |", "|---|---|---|---|"]
    for r in rows:
        cells = []
        for a in ("yes", "no"):
            c, k = r[a], r[a]["counts"]
            cells.append(f"{c['precision']:.3f} / {c['recall']:.3f} ({k['tp']} {k['fp']} "
                         f"{k['fn']})")
        lines.append(f"| {r['row']} | {r['asked']} of {r['sentences_in']} "
                     f"({r['questions']} questions) | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=dev.DEFAULT_SHARED)
    ap.add_argument("--split", default="tune", choices=["all", "tune", "held-out"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="judge-routing-") as tmp:
        rows = run(args.shared, args.split, Path(tmp))
    print(f"FaithScore dev labels, split {args.split}, caption level; scripted judges:\n")
    print(markdown(rows))


if __name__ == "__main__":
    sys.exit(main())
