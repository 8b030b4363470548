"""Ground-truth "detector": COCO instances as an oracle, for ablations.

Why: to separate the effect of detector errors from the effect of the fusion
prompt, run FuseCap with perfect tags. Reads the real COCO instances JSON
(boxes converted from ``[x, y, w, h]`` to ``[x0, y0, x1, y1]``) or the JSONL
``{"image_id", "categories"}`` form (no boxes). Score is always 1.0. The file is a path or
a URL (read through the storage layer: a private copy of the same name, once per worker).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from capaudit.enrich.detectors.base import Detection, Detector
from capaudit.errors import InputError


class AnnotationDetector(Detector):
    name = "annotations"

    def __init__(self, path: str | None = None, **_):
        from capaudit.core.storage.paths import as_local, is_file
        from capaudit.core.storage.urls import local_path, name_of, shown_url

        fix = "pass --annotations PATH (COCO instances JSON or JSONL; a path or a URL)"
        if not path:
            raise InputError("the annotations detector needs an instances file", fix=fix)
        path, on_disk = str(path), local_path(str(path))
        if not (on_disk.is_file() if on_disk is not None else is_file(path)):
            raise InputError("no such annotations file", path=shown_url(path), fix=fix)
        self.model_id = f"annotations:{name_of(path)}"
        self.by_id: dict[int, list[Detection]] = defaultdict(list)
        # a URL (s3://, gs://, http(s)://...): a private temporary copy of the same name (its
        # suffix picks the layout), read once per worker like a local file; errors name the URL
        # (as_local rewrites them)
        with as_local(path) as (p, _):
            self._load(p)

    def _load(self, p: Path) -> None:
        if p.suffix.lower() == ".json":
            self._load_coco(p)
        else:
            from capaudit.io.annotation_files import load_instances

            cats, _ = load_instances(p)
            for iid, names in cats.items():
                self.by_id[iid] = [Detection(c, 1.0, None) for c in sorted(names)]

    def _load_coco(self, p: Path) -> None:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            names = {c["id"]: c["name"] for c in data["categories"]}
            for ann in data["annotations"]:
                box = ann.get("bbox")
                box = (box[0], box[1], box[0] + box[2], box[1] + box[3]) if box else None
                self.by_id[int(ann["image_id"])].append(
                    Detection(names[ann["category_id"]], 1.0, box))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"not a COCO instances file ({exc.__class__.__name__}: {exc})",
                             path=p) from None

    def detect(self, images, image_ids):
        return [list(self.by_id.get(iid, [])) if iid is not None else [] for iid in image_ids]
