"""How far to trust detector evidence: detector labels against COCO labels, per category, and
CHAIR / recall of a caption set with each evidence.

    PYTHONPATH=src python benchmarks/detector_evidence.py --images val2014/ \\
        [--instances ../shared/data/coco2014/instance_categories_val2014.jsonl] \\
        [--captions ../shared/data/captioners/oscar_val2014_all.jsonl] [--limit 5000]

Images are keyed by their COCO file name (``COCO_val2014_000000318219.jpg`` -> 318219).
Prints, per category, the detector's precision and recall against the COCO labels (images
where COCO lists the category vs images where the detector finds it at ``--min-score``),
then CHAIR_s, CHAIR_i and recall of the captions of those images with COCO evidence and
with detector evidence. The real figure needs a COCO val2014 copy (none is shipped);
``tests/test_detector_evidence.py`` runs it on scikit-image photos keyed to made-up ids.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def detected_instances(images: list[Path], detector: str, min_score: float) -> dict:
    from capaudit.enrich.detectors import make_detector
    from capaudit.enrich.detectors.base import decode_image
    from capaudit.io.imageids import parse_image_id

    det = make_detector(detector, {})
    out = {}
    for p in images:
        iid = parse_image_id(p.name)
        if iid is None:
            continue
        found = det.detect([decode_image(p.read_bytes())], [iid])[0]
        out[iid] = frozenset(d.category for d in found if d.score >= min_score)
    return out


def per_category(coco: dict, detected: dict) -> dict[str, dict]:
    """``{category: {coco, detected, both, precision, recall}}`` over the common images."""
    cats = sorted({c for i in detected for c in coco.get(i, ()) | detected[i]})
    table = {}
    for c in cats:
        in_coco = {i for i in detected if c in coco.get(i, ())}
        in_det = {i for i in detected if c in detected[i]}
        both = len(in_coco & in_det)
        table[c] = {"coco": len(in_coco), "detected": len(in_det), "both": both,
                    "precision": both / len(in_det) if in_det else None,
                    "recall": both / len(in_coco) if in_coco else None}
    return table


def caption_metrics(ids, caps, evidence: dict) -> dict:
    from capaudit.audit.engine import audit_captions
    from capaudit.io.annotation_files import Annotations

    ann = Annotations(instances=evidence, chair_gt=evidence)
    res = audit_captions(ids, caps, ann, metrics=["chair_s", "chair_i", "recall"], n_boot=200,
                         workers=1)
    return {k: r.to_dict() for k, r in res.results.items()}


def evaluate(images: list[Path], coco: dict, rows: list[tuple[int, str]], detector: str,
             min_score: float) -> dict:
    detected = detected_instances(images, detector, min_score)
    rows = [(i, c) for i, c in rows if i in detected]
    ids, caps = [i for i, _ in rows], [c for _, c in rows]
    return {"images": len(detected), "captions": len(rows),
            "per_category": per_category(coco, detected),
            "coco_evidence": caption_metrics(ids, caps, {i: coco.get(i, frozenset())
                                                         for i in detected}),
            "detector_evidence": caption_metrics(ids, caps, detected)}


def main() -> None:
    import os

    shared = Path(os.environ.get("CAPAUDIT_SHARED", "../shared"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", required=True, type=Path)
    ap.add_argument("--instances", type=Path,
                    default=shared / "data/coco2014/instance_categories_val2014.jsonl")
    ap.add_argument("--captions", type=Path,
                    default=shared / "data/captioners/oscar_val2014_all.jsonl")
    ap.add_argument("--detector", default="ssd-mobilenet")
    ap.add_argument("--min-score", type=float, default=0.5)
    ap.add_argument("--limit", type=int, default=0, help="first N images (0 = all)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    from capaudit.io.annotation_files import load_instances

    images = sorted(p for p in args.images.iterdir() if p.suffix.lower() in (".jpg", ".png"))
    images = images[: args.limit] if args.limit else images
    coco, _ = load_instances(args.instances)
    rows = [(r["image_id"], r["caption"]) for r in map(json.loads, args.captions.open())]
    out = evaluate(images, coco, rows, args.detector, args.min_score)
    print(f"{out['images']} images, {out['captions']} captions")
    print(f"{'category':16} {'coco':>6} {'det':>6} {'prec':>6} {'rec':>6}")
    for c, r in out["per_category"].items():
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"{c:16} {r['coco']:6} {r['detected']:6} {fmt(r['precision']):>6} "
              f"{fmt(r['recall']):>6}")
    for k in ("chair_s", "chair_i", "recall"):
        print(f"{k:8} COCO evidence {out['coco_evidence'][k]['value']}  detector evidence "
              f"{out['detector_evidence'][k]['value']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
