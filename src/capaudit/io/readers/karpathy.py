"""Karpathy split files: ``dataset_coco.json``, ``dataset_flickr30k.json``, ``dataset_flickr8k.json``.

``{"images": [{"filename", "split", "sentences": [{"raw", ...}], "cocoid"?}], "dataset"}``:
one caption per sentence (``raw``, the untokenised text), ``--split`` keeps one of
``train``/``val``/``test``/``restval``. The namespace is the evidence the file gives:
a ``cocoid`` is a COCO 2014 id (the split re-divides train2014 + val2014), the
``dataset`` field names Flickr30k or Flickr8k. ``meta.src`` is the image's index in
``images`` and ``meta.sent`` the sentence's, so the set can be written back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id, require_image_id
from capaudit.io.layouts.json import load_json_document
from capaudit.io.readers.base import row_batches
from capaudit.io.readers.records import RecordReader

SPLITS = ("train", "val", "test", "restval")


class KarpathyReader(RecordReader):
    name = "karpathy"
    expects = "a JSON object with 'images' whose entries hold 'sentences' and 'split'"
    accepts = frozenset({"split", "where", "skip_no_image"})

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return (not path.is_dir() and head.lstrip().startswith(b"{") and b'"images"' in head
                and b'"sentences"' in head and (b'"split"' in head or b'"dataset"' in head))

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        split = self.options.get("split")
        if split is not None and split not in SPLITS:
            raise InputError(f"unknown --split '{split}'", fix=f"use one of {', '.join(SPLITS)}")
        data = load_json_document(path)
        if not isinstance(data, dict) or not isinstance(data.get("images"), list):
            raise InputError("not a Karpathy split file: no 'images' list", path=path,
                             fix="pass --format coco for COCO captions JSON")
        dataset = str(data.get("dataset", "")).lower()
        yield from row_batches(self._rows(path, data["images"], split, dataset), self)

    def _rows(self, path: Path, images: list, split: str | None, dataset: str
              ) -> Iterator[tuple]:
        keep = self.where_mask(path, "images")
        for i, img in enumerate(images):
            row = i + 1
            if not isinstance(img, dict) or not isinstance(img.get("sentences"), list):
                raise InputError("image entry lacks a 'sentences' list", path=path, row=row)
            if (split and img.get("split") != split) or keep is not None and not (
                    i < len(keep) and keep[i]):
                continue
            name = img.get("filename")
            if "cocoid" in img:
                iid = require_image_id(img["cocoid"], what="cocoid", path=path, row=row)
                ns = "coco2014"
            elif dataset in ("flickr30k", "flickr8k"):
                iid, ns = parse_image_id(name), dataset
            else:
                iid, ns = None, None
            if name is None and iid is None:
                self.no_image(path, row)
                continue
            for j, sent in enumerate(img["sentences"]):
                raw = sent.get("raw") if isinstance(sent, dict) else None
                if raw is None and isinstance(sent, dict) and isinstance(sent.get("tokens"), list):
                    raw = " ".join(sent["tokens"])
                meta = json.dumps({"src": i, "sent": j, "split": str(img.get("split")),
                                   **({"file": name} if isinstance(name, str) else {})},
                                  ensure_ascii=False)
                yield str(iid) if iid is not None else str(name), iid, raw, meta, ns
