"""Rebuild the bundled demo data (src/capaudit/data/demo) from ../shared.

Takes the first 1,000 images (by id) that are both in the COCO caption
subset and among the 10,780 gender-labelled images, so that every demo set
(human captions, oscar, nic) covers the same images. Run from the repo root:
``python tools/make_demo_data.py [SHARED_DIR]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

N_IMAGES = 1000


def main(shared: Path, out: Path) -> None:
    data = shared / "data"
    coco = json.loads((data / "coco2014" / "captions_val2014_subset.json").read_text())
    labelled = {json.loads(l)["image_id"]
                for l in open(data / "captioners" / "nic_val2014_gender.jsonl")}
    ids = sorted({im["id"] for im in coco["images"]} & labelled)[:N_IMAGES]
    keep = set(ids)
    out.mkdir(parents=True, exist_ok=True)
    demo = {"info": {"description": "capaudit demo: 1,000-image subset of COCO val2014 captions"},
            "licenses": coco.get("licenses", []),
            "images": [{"id": im["id"], "file_name": im["file_name"],
                        "height": im["height"], "width": im["width"]}
                       for im in coco["images"] if im["id"] in keep],
            "annotations": [a for a in coco["annotations"] if a["image_id"] in keep]}
    (out / "coco_captions.json").write_text(json.dumps(demo))
    copies = {
        "instance_categories.jsonl": data / "coco2014" / "instance_categories_val2014.jsonl",
        "chair_gt.jsonl": data / "coco2014" / "chair_objects_trainval2014.jsonl",
        "demographics.jsonl": data / "coco2014" / "demographics_val2014.jsonl",
        "oscar.jsonl": data / "captioners" / "oscar_val2014_gender.jsonl",
        "nic.jsonl": data / "captioners" / "nic_val2014_gender.jsonl",
    }
    for name, src in copies.items():
        with open(src) as fin, open(out / name, "w") as fout:
            for line in fin:
                if json.loads(line)["image_id"] in keep:
                    fout.write(line)
    print(f"wrote demo data for {len(ids)} images to {out}")


if __name__ == "__main__":
    repo = Path(__file__).resolve().parents[1]
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else repo.parent / "shared"
    main(shared, repo / "src" / "capaudit" / "data" / "demo")
