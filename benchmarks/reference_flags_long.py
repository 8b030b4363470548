"""What the hallucination filter flags with references on real long descriptions (#42).

    PYTHONPATH=src python benchmarks/reference_flags_long.py [--shared ../shared] [--top 25]
        [--json OUT]

The descriptions: the 38 ShareGPT4V GPT-4V captions (``data/enriched/``) and the 15 LLaVA
GPT-4 answers (``data/real/``, 5 images x 3) whose COCO images have human captions in
``../shared`` (``coco2014/captions_val2014_subset.json``, ``coco2017/captions_val2017.json``,
same ids), each record carrying its image's captions as ``references``. They run through the
issue's command, ``filter run --filter hallucination --action flag --chair-gt GT
--reference-col references`` (no object mode: visual, chosen because references are given),
in a fresh store. Printed: sentences, sentences flagged, and the categories that the
references alone left unsupported (``references: none of N names it``), most frequent first,
with one sentence each: the list to read for systematic false flags (the backdrop, the parts
of a named whole and figurative nouns were found this way: docs/filters.md). No labels: a
flag here is not known to be right or wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
CAPTIONS = (("data", "coco2014", "captions_val2014_subset.json"),
            ("data", "coco2017", "captions_val2017.json"))
SHAREGPT4V = ("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
LLAVA = ("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
UNSUPPORTED = re.compile(r"([^,;\[\]]+?)->([^,;\[\]]+?) \[references: none of \d+ names it\]")


def records(shared: Path) -> list[dict]:
    """The long descriptions whose images have COCO captions, each with its references."""
    refs: dict[int, list[str]] = {}
    for parts in CAPTIONS:
        for a in json.loads(shared.joinpath(*parts).read_text())["annotations"]:
            texts = refs.setdefault(a["image_id"], [])
            if a["caption"].strip() not in texts:
                texts.append(a["caption"].strip())
    out = []
    for r in json.loads(shared.joinpath(*SHAREGPT4V).read_text()):
        iid = int(Path(r["image"]).stem)
        if iid in refs:
            out.append({"image_id": iid, "caption": r["conversations"][1]["value"],
                        "references": refs[iid]})
    for r in map(json.loads, shared.joinpath(*LLAVA).read_text().splitlines()):
        iid = int(Path(r["image"]).stem.rsplit("_", 1)[-1])
        if iid in refs:
            out.append({"image_id": iid, "caption": r["output"], "references": refs[iid]})
    return out


def run(shared: Path, work: Path) -> dict:
    import capaudit

    rows = records(shared)
    src = work / "long.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = capaudit.open(work / "s.duckdb")
    store.add_set("long", src)
    _, summary = store.filter("long", "hallucination", "long_f", action="flag",
                              chair_gt=str(shared.joinpath(*GT)), reference_col="references")
    log = store.query("SELECT action, reason, original FROM filter_log WHERE set_name = "
                      "'long_f' ORDER BY row_idx, sentence_idx").rows
    cats: Counter = Counter()
    example: dict[str, str] = {}
    for action, reason, sentence in log:
        if action != "flag":
            continue
        for _, cat in set(UNSUPPORTED.findall(reason)):
            cats[cat.strip()] += 1
            example.setdefault(cat.strip(), sentence)
    return {"records": len(rows), "sentences": len(log),
            "flagged": sum(a == "flag" for a, _, _ in log),
            "object_mode": summary.as_dict().get("chosen", {}).get("object_mode"),
            "unsupported_by_references": [{"category": c, "sentences": n,
                                           "example": example[c]}
                                          for c, n in cats.most_common()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", type=Path, help="also write the result as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ref-flags-") as tmp:
        res = run(args.shared, Path(tmp))
    print(f"{res['records']} long descriptions, {res['sentences']} sentences, "
          f"{res['flagged']} flagged ({res['object_mode']})\n")
    print("| category | sentences flagged (references name none) | example |\n|---|---|---|")
    for row in res["unsupported_by_references"][:args.top]:
        print(f"| {row['category']} | {row['sentences']} | {row['example'][:90]} |")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
