"""COCO captions JSON (``images`` + ``annotations``), several captions per image."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import document_namespace, require_image_id
from capaudit.io.layouts.json import load_json_document
from capaudit.io.readers.base import CaptionReader, row_batches


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
        if not isinstance(data["annotations"], list):
            raise InputError(f"'annotations' is not a list ({_kind(data['annotations'])})",
                             path=path, fix="'annotations' holds objects like "
                                            "{\"image_id\": 1, \"caption\": ...}")
        yield from id_caption_batches(self._rows(data["annotations"], names, path), ns, self)

    @staticmethod
    def _rows(annotations: list, names: dict, path: Path) -> Iterator[tuple]:
        for i, iid, ann in checked_records(annotations, "annotation", path):
            if names and iid not in names:
                raise InputError(f"annotation {i + 1} refers to unknown image id {iid}",
                                 path=path, row=i + 1,
                                 fix="add the image to 'images' or drop the annotation")
            name = names.get(iid)   # the image's file name, for the exports (io.image_names)
            yield iid, ann["caption"], (f'{{"src": {i}}}' if name is None or name == str(iid)
                                        else json.dumps({"src": i, "file": name},
                                                        ensure_ascii=False))


def checked_records(records: list, what: str, path: Path) -> Iterator[tuple[int, int, dict]]:
    """``(index, image id, record)`` of a list of ``{"image_id", "caption"}`` objects (COCO's
    annotations, CHAIR's sentences), each checked, a bad one named by its row in one line."""
    for i, rec in enumerate(records):
        row = i + 1
        if not isinstance(rec, dict) or "image_id" not in rec or "caption" not in rec:
            raise InputError(f"{what} {row} lacks 'image_id' or 'caption'", path=path,
                             row=row, fix=f"each {what} needs image_id and caption")
        yield i, require_image_id(rec["image_id"], what=f"{what} {row} image_id", path=path,
                                  row=row), rec


def id_caption_batches(rows, namespace: str | None, reader: CaptionReader
                       ) -> Iterator[pa.RecordBatch]:
    """Batches of ``(image id, caption, meta text)`` rows of one namespace."""
    yield from row_batches(((str(iid), iid, cap, meta, namespace) for iid, cap, meta in rows),
                           reader)


def _kind(value) -> str:
    """How a message names a JSON value that is not the list expected."""
    return "null" if value is None else f"a {type(value).__name__}"
