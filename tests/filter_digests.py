"""Digests of what the hallucination filter gives on every caption file in ``../shared/data``
(issue #43: the filter made faster must decide exactly as before, byte for byte).

Per file and setting, the user's own path: ``sets add`` (with the namespace the file's ids
belong to), ``filter run --filter hallucination --chair-gt chair_objects_trainval2014.jsonl``
(the setting's options), then three sha256 digests:

* ``output``: the bytes of ``sets export NEWSET --to jsonl`` (every kept caption, as revised);
* ``log``: the store's ``filter_log`` rows of the run (what ``filter log --all`` shows), every
  column but the run id, in caption and sentence order, one JSON array per row;
* ``summary``: the run's counts and the filter's report (parse and review counts, evidence
  coverage; not the evidence file's path, which differs from machine to machine).

Slices: ``head`` is the first :data:`HEAD` captions of each large file (a COCO JSON keeps the
images of those captions) and the small files (``real/``, ``enriched/``) whole: the default
test, a few CPU-seconds a setting. ``full`` is every file whole (``CAPAUDIT_FULL_DIGESTS=1``).

Regenerate (only when a change of decisions is intended, and say so in the commit):

    PYTHONPATH=src python tests/filter_digests.py [--slices head,full] [--out tests/filter_digests.json]
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
DIGESTS = Path(__file__).with_name("filter_digests.json")
GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
HEAD = 300

#: (file under data/, namespace for ``sets add`` (None: inferred), sliced in ``head``?,
#: allow a partial cover (the file's ids are not COCO images'))
FILES = [
    ("coco2014/captions_val2014_subset.json", "coco2014", True, False),
    ("coco2017/captions_val2017.json", "coco2017", True, False),
    *[(f"captioners/{m}_val2014_{s}.jsonl", "coco2014", True, False) for m, s in
      (("att2in", "gender"), ("nic_plus", "gender"), ("nic", "gender"), ("oscar", "all"),
       ("oscar", "gender"), ("sat", "gender"), ("updn", "gender"))],
    ("enriched/sharegpt4v_gpt4v_coco2017_890.json", None, False, False),
    ("real/llava_coco2014_val_gpt4_qa_30x3.jsonl", None, False, False),
    ("real/capsfusion_example_data.json", None, True, True),
    ("real/llamafactory_mllm_demo.json", None, False, True),
]
#: filter settings: the default, and reference words judged without a parse
SETTINGS = {"default": {},
            "reference-judge": {"object_mode": "reference", "non_visual": "judge"}}
LOG_COLUMNS = ("row_idx", "new_row_idx", "image_id", "sentence_idx", "action", "reason",
               "original", "revised", "critique", "score")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sliced(src: Path, dst: Path, n: int) -> Path:
    """The first ``n`` captions of ``src`` in its own layout (JSONL lines; a COCO captions
    JSON's first ``n`` annotations and their images; a JSON list's first ``n`` records)."""
    text = src.read_text("utf-8")
    if src.suffix == ".jsonl":
        dst.write_text("".join(text.splitlines(keepends=True)[:n]), "utf-8")
        return dst
    data = json.loads(text)
    if isinstance(data, dict):   # COCO: {"images", "annotations", ...}
        anns = data["annotations"][:n]
        ids = {a["image_id"] for a in anns}
        data = {**data, "annotations": anns,
                "images": [im for im in data["images"] if im["id"] in ids]}
    else:
        data = data[:n]
    dst.write_text(json.dumps(data), "utf-8")
    return dst


def digest_file(tmp: Path, rel: str, namespace, partial: bool, options: dict,
                n: int | None) -> dict:
    """The three digests of one file (its first ``n`` captions; ``None``: whole)."""
    import capaudit

    src = SHARED / "data" / rel
    if n is not None:
        src = sliced(src, tmp / src.name, n)
    store = capaudit.open(tmp / "d.duckdb")
    extra = {"namespace": namespace} if namespace else {}
    store.add_set("s", src, **extra)
    opts = {"chair_gt": str(SHARED.joinpath(*GT)), **options}
    if partial:
        opts["allow_partial"] = True
    _, summary = store.filter("s", "hallucination", "s_f", **opts)
    out = store.export("s_f", "jsonl", tmp / "out.jsonl")
    rows = store.query(f"SELECT {', '.join(LOG_COLUMNS)} FROM filter_log WHERE set_name = "
                       "'s_f' ORDER BY row_idx, sentence_idx").rows
    log = "".join(json.dumps(list(r), ensure_ascii=False) + "\n" for r in rows)
    report = json.loads(json.dumps(summary.extra, default=str))
    report.get("evidence", {}).pop("source", None)
    counts = {"captions_in": summary.captions_in, "captions_out": summary.captions_out,
              "sentences_in": summary.sentences_in, "actions": dict(sorted(summary.actions.items())),
              "report": report}
    return {"output": _sha(out.read_bytes()), "log": _sha(log.encode("utf-8")),
            "summary": _sha(json.dumps(counts, sort_keys=True).encode("utf-8")),
            "log_rows": len(rows)}


def cases(slice_name: str):
    """``(key, file, namespace, partial, options, n)`` of every digest of a slice."""
    for rel, ns, cut, partial in FILES:
        for setting, options in SETTINGS.items():
            n = HEAD if slice_name == "head" and cut else None
            yield f"{slice_name}:{setting}:{rel}", rel, ns, partial, options, n


def compute(slice_name: str) -> dict:
    out = {}
    for key, rel, ns, partial, options, n in cases(slice_name):
        with tempfile.TemporaryDirectory() as tmp:
            out[key] = digest_file(Path(tmp), rel, ns, partial, options, n)
        print(key, out[key]["log_rows"], file=sys.stderr)
    return out


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slices", default="head,full")
    ap.add_argument("--out", type=Path, default=DIGESTS)
    args = ap.parse_args(argv)
    known = json.loads(args.out.read_text()) if args.out.exists() else {}
    for s in args.slices.split(","):
        known.update(compute(s))
    args.out.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
