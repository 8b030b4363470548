"""The hallucination filter on the development labels, one row per evidence kind and option (#42).

    PYTHONPATH=src python benchmarks/dev_set_table.py [--shared ../shared] [--split tune]
        [--n-boot 1000] [--json OUT]

The labels: FaithScore's human annotation (``data/human_labels/faithscore_annotation.jsonl``,
MIT; 180 LLaVA answers on 30 COCO val2014 images, 171 distinct). The set: the 180 records as
``{"image_id": int(id), "caption": answer}`` (the human_labels README's protocol). Each row
of the table runs ``filter run --filter hallucination --action flag`` with one evidence kind
and its options, then ``filter validate`` on the answers of the split's images (caption
level: an answer counts as flagged when any of its sentences is not kept), through the
Python API, in a fresh store.

The split (fixed, by image): the 30 images ordered by the sha256 of their 12-digit id; the
last 10 are **held out** (:data:`HELD_OUT`, written down here and in docs/filters.md): no
threshold or rule is chosen on them, and their figures are computed only with
``--split held-out``, to check a change once it is made. ``tune`` is the other 20 images,
``all`` the 30 (the README's baseline row: precision 0.773, recall 0.436, tp 34 fp 10 fn 44
tn 83).

Evidence kinds that run offline here (#42 part 2 rows: object mode ``visual``, and the
images' COCO captions as ``--references``, 5 of the 30 images: :data:`REFERENCE_FILES`): ``chair-gt`` (CHAIR ground truth,
``coco2014/chair_objects_trainval2014.jsonl``; object mode ``corrected`` or ``reference``;
non-visual mentions ``keep`` or ``judge``) and ``instances`` (COCO instance categories,
``coco2014/instance_categories_val2014.jsonl``). The detector evidence needs the images,
which are not in ../shared: it is not in the table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
LABELS = ("data", "human_labels", "faithscore_annotation.jsonl")
CHAIR_GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
INSTANCES = ("data", "coco2014", "instance_categories_val2014.jsonl")
N_HELD_OUT = 10

# (row name, filter options); the file options are filled in from --shared
ROWS = [
    ("chair-gt, corrected, non-visual keep (default)",
     {"evidence": "chair-gt", "object_mode": "corrected", "non_visual": "keep"}),
    ("chair-gt, corrected, non-visual judge",
     {"evidence": "chair-gt", "object_mode": "corrected", "non_visual": "judge"}),
    ("chair-gt, reference, non-visual keep",
     {"evidence": "chair-gt", "object_mode": "reference", "non_visual": "keep"}),
    ("chair-gt, reference, non-visual judge",
     {"evidence": "chair-gt", "object_mode": "reference", "non_visual": "judge"}),
    ("instances, corrected, non-visual keep",
     {"evidence": "instances", "object_mode": "corrected", "non_visual": "keep"}),
    # the larger vocabulary and the reference texts (#42 part 2); "+ references" rows read
    # every COCO caption ../shared holds for the images (5 of the 30: REFERENCE_FILES)
    ("chair-gt, visual (other objects undecided)",
     {"evidence": "chair-gt", "object_mode": "visual"}),
    ("instances, visual (other objects undecided)",
     {"evidence": "instances", "object_mode": "visual"}),
    ("chair-gt + references, visual, similarity off",
     {"evidence": "chair-gt", "object_mode": "visual", "similarity": 2.0, "refs": True}),
    ("chair-gt + references, visual, similarity 0.9",
     {"evidence": "chair-gt", "object_mode": "visual", "similarity": 0.9, "refs": True}),
    ("chair-gt + references, visual, similarity 0.8 (default)",
     {"evidence": "chair-gt", "object_mode": "visual", "similarity": 0.8, "refs": True}),
    ("chair-gt + references, visual, similarity 0.7",
     {"evidence": "chair-gt", "object_mode": "visual", "similarity": 0.7, "refs": True}),
    # what a user gets who hands the filter references and nothing else (the issue's
    # command): no evidence or object mode given, so chair-gt + the visual vocabulary
    ("chair-gt + references (default object mode)", {"refs": True}),
    ("references alone, visual, similarity 0.8 (5 images judged)",
     {"evidence": "references", "object_mode": "visual", "similarity": 0.8, "refs": True,
      "allow_partial": True}),
]
REFERENCE_FILES = (("data", "coco2014", "captions_val2014_subset.json"),
                   ("data", "coco2017", "captions_val2017.json"))


def write_references(shared: Path, ids: set[int], path: Path) -> Path:
    """Every COCO caption ../shared holds for the images, as ``{"image_id", "caption"}``
    JSONL (the 2014 subset and the 2017 val captions: same ids, COCO's own images)."""
    seen, lines = set(), []
    for parts in REFERENCE_FILES:
        for a in json.loads(shared.joinpath(*parts).read_text())["annotations"]:
            key = (a["image_id"], a["caption"].strip())
            if a["image_id"] in ids and key not in seen:
                seen.add(key)
                lines.append(json.dumps({"image_id": a["image_id"], "caption": key[1]}) + "\n")
    path.write_text("".join(lines))
    return path


def image_split(ids) -> dict[str, list[str]]:
    """``{"tune": [...], "held-out": [...]}``: the ids ordered by sha256, the last
    :data:`N_HELD_OUT` held out."""
    order = sorted(set(ids), key=lambda i: hashlib.sha256(i.encode()).hexdigest())
    return {"tune": sorted(order[:-N_HELD_OUT]), "held-out": sorted(order[-N_HELD_OUT:])}


def _labels_for(records: list[dict], images: set[str], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records if r["id"] in images))
    return path


def run(shared: Path, split: str, n_boot: int, work: Path) -> list[dict]:
    import capaudit

    records = [json.loads(line) for line in shared.joinpath(*LABELS).read_text().splitlines()]
    images = {r["id"] for r in records}
    chosen = images if split == "all" else set(image_split(images)[split])
    src = work / "faithscore_set.jsonl"
    src.write_text("".join(json.dumps({"image_id": int(r["id"]), "caption": r["answer"]})
                           + "\n" for r in records))
    labels = _labels_for(records, chosen, work / f"labels_{split}.jsonl")
    store = capaudit.open(work / "dev.duckdb")
    store.add_set("fs", src)
    files = {"chair-gt": {"chair_gt": str(shared.joinpath(*CHAIR_GT))},
             "instances": {"instances": str(shared.joinpath(*INSTANCES))}, "references": {}}
    refs = str(write_references(shared, {int(i) for i in images}, work / "references.jsonl"))
    out = []
    for i, (name, row_opts) in enumerate(ROWS):
        opts = {k: v for k, v in row_opts.items() if k != "refs"}
        if row_opts.get("refs"):
            opts["references"] = refs
        store.filter("fs", "hallucination", f"f{i}", action="flag",
                     **opts, **files[opts.get("evidence", "chair-gt")])
        v = store.validate_filter(labels, f"f{i}", n_boot=n_boot)
        out.append({"row": name, "options": opts, "split": split,
                    "images": len(chosen), "status": v["status"], "caption": v["caption"]})
    return out


def markdown(rows: list[dict]) -> str:
    def cell(lv, key):
        lo, hi = lv["ci"][key]
        n = {"precision": lv["n_precision"], "recall": lv["n_recall"]}.get(key, lv["n"])
        v = lv[key]
        return "n/a" if v is None else \
            f"{v:.3f} [{lo:.2f}, {hi:.2f}] (n {n})" if lo is not None else f"{v:.3f} (n {n})"

    lines = ["| evidence, object mode, non-visual | precision | recall | F1 | tp | fp | fn | "
             "tn | status |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["caption"]
        k = c["counts"]
        lines.append(f"| {r['row']} | {cell(c, 'precision')} | {cell(c, 'recall')} | "
                     f"{cell(c, 'f1')} | {k['tp']} | {k['fp']} | {k['fn']} | {k['tn']} | "
                     f"{r['status']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--split", default="all", choices=["all", "tune", "held-out"])
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dev-set-") as tmp:
        rows = run(args.shared, args.split, args.n_boot, Path(tmp))
    n = rows[0]["images"] if rows else 0
    print(f"FaithScore dev labels, split {args.split} ({n} images), caption level, "
          f"{args.n_boot} image-bootstrap resamples, seed 0:\n")
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
