"""COCO captions JSON (``images`` + ``annotations``), several captions per image."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import document_namespace, require_image_id
from capaudit.io.readers.base import CaptionReader, load_json_document, make_batch


class CocoReader(CaptionReader):
    name = "coco"
    expects = "a JSON object with 'images' and 'annotations'"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir() or path.suffix.lower() != ".json":
            return False
        text = head.lstrip()
        return text.startswith(b"{") and any(
            k in head for k in (b'"annotations"', b'"images"', b'"licenses"', b'"info"'))

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        data = load_json_document(path)
        if not isinstance(data, dict) or "annotations" not in data:
            raise InputError("not a COCO captions file: no 'annotations' list", path=path,
                             fix="pass --format karpathy, jsonl or llava for other layouts")
        names = {}
        images = data.get("images", [])   # absent: no image list; null or anything else: refused
        if not isinstance(images, list):
            raise InputError(f"'images' is not a list ({_kind(images)})", path=path,
                             fix="'images' holds objects like {\"id\": 1, \"file_name\": ...}")
        for i, img in enumerate(images):
            if not isinstance(img, dict):
                raise InputError(f"images entry {i + 1} is not an object", path=path,
                                 fix="each image is an object like {\"id\": 1, ...}")
            if "id" in img:
                iid = require_image_id(img["id"], what=f"images entry {i + 1} id", path=path)
                names[iid] = img["file_name"] if isinstance(img.get("file_name"), str) \
                    else str(iid)
        # the layout is no evidence of COCO ids (nocaps borrows it): the info block, URLs,
        # file names and extra id fields are; none of them -> unassigned
        ns = document_namespace(data.get("info"), images)
        keys, ids, caps, metas = [], [], [], []
        if not isinstance(data["annotations"], list):
            raise InputError(f"'annotations' is not a list ({_kind(data['annotations'])})",
                             path=path, fix="'annotations' holds objects like "
                                            "{\"image_id\": 1, \"caption\": ...}")
        for i, ann in enumerate(data["annotations"]):
            row = i + 1
            if not isinstance(ann, dict) or "image_id" not in ann or "caption" not in ann:
                raise InputError(f"annotation {row} lacks 'image_id' or 'caption'", path=path,
                                 row=row, fix="each annotation needs image_id and caption")
            iid = require_image_id(ann["image_id"], what=f"annotation {row} image_id",
                                   path=path, row=row)
            if names and iid not in names:
                raise InputError(f"annotation {row} refers to unknown image id {iid}", path=path,
                                 row=row, fix="add the image to 'images' or drop the annotation")
            keys.append(str(iid))
            ids.append(iid)
            caps.append(ann["caption"] if isinstance(ann["caption"], str) else None)
            name = names.get(iid)   # the image's file name, for the exports (io.image_names)
            metas.append(f'{{"src": {i}}}' if name is None or name == keys[-1] else
                         json.dumps({"src": i, "file": name}, ensure_ascii=False))
            if len(keys) >= self.batch_size:
                yield make_batch(keys, ids, caps, metas, ns)
                keys, ids, caps, metas = [], [], [], []
        if keys:
            yield make_batch(keys, ids, caps, metas, ns)


def _kind(value) -> str:
    """How a message names a JSON value that is not the list expected."""
    return "null" if value is None else f"a {type(value).__name__}"
