"""Gender derived from one caption per image (alt-text-like), against the COCO labels.

    PYTHONPATH=src python benchmarks/alt_text_demographics.py [--shared ../shared]

A web set has one alt-text per image; ``capaudit annotations derive-demographics SET``
derives image gender from the set's own captions (rule ``all``: every caption of the image
uses man words only -> male, woman words only -> female; else no label). This measures that
rule on COCO with a single human caption per image (the first, then each of the five in
turn) against ``demographics_val2014.jsonl`` (Zhao et al.) on the images both cover.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.environ.get("CAPAUDIT_SHARED", "../shared"))
    args = ap.parse_args()
    from capaudit.io.annotation_files import demographics_from_captions, load_demographics
    from capaudit.text.gender import predict_gender
    from capaudit.text.tokenize import tokenize

    coco = Path(args.shared) / "data" / "coco2014"
    caps = json.loads((coco / "captions_val2014_subset.json").read_text())["annotations"]
    by_image: dict[int, list[str]] = defaultdict(list)
    for a in caps:
        by_image[a["image_id"]].append(a["caption"])
    truth, _ = load_demographics(coco / "demographics_val2014.jsonl")
    for k in range(5):
        ids = [i for i in by_image if len(by_image[i]) > k and i in truth]
        preds = [predict_gender(tokenize(by_image[i][k])) for i in ids]
        got = demographics_from_captions(ids, preds, rule="all")
        labelled = {i: g for i, g in got.items() if g in ("male", "female")}
        right = sum(labelled[i] == truth[i] for i in labelled)
        print(json.dumps({"caption": k + 1, "images_with_coco_label": len(ids),
                          "labelled": len(labelled), "coverage": round(len(labelled) / len(ids), 3),
                          "accuracy_when_labelled": round(right / max(len(labelled), 1), 4),
                          "wrong": len(labelled) - right}))


if __name__ == "__main__":
    main()
