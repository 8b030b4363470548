"""Released JSON of LLM-enriched COCO sets: ShareGPT4V (LLaVA conversations) and FuseCap.

ShareGPT4V releases a list of ``{"id", "image", "conversations"}`` where the
caption is the first ``gpt`` turn; FuseCap releases a mapping from image file
name to caption (a list of records is accepted too). Image ids come from the
COCO file name (``coco/train2017/000000000009.jpg`` -> 9).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.readers.base import CaptionReader, load_json_document, make_batch


class _BatchingReader(CaptionReader):
    def _emit(self, rows) -> Iterator[pa.RecordBatch]:
        keys, ids, caps, metas = [], [], [], []
        for key, cap, meta in rows:
            keys.append(str(key))
            ids.append(parse_image_id(key))
            caps.append(cap if isinstance(cap, str) else None)
            metas.append(meta)
            if len(keys) >= self.batch_size:
                yield make_batch(keys, ids, caps, metas)
                keys, ids, caps, metas = [], [], [], []
        if keys:
            yield make_batch(keys, ids, caps, metas)


class ShareGPT4VReader(_BatchingReader):
    name = "sharegpt4v"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return (not path.is_dir() and head.lstrip().startswith(b"[")
                and b'"conversations"' in head)

    def _rows(self, path: Path, data):
        if not isinstance(data, list):
            raise InputError("ShareGPT4V JSON must be a list of records", path=path)
        for i, rec in enumerate(data):
            row = i + 1
            if not isinstance(rec, dict) or "conversations" not in rec:
                raise InputError("record lacks 'conversations'", path=path, row=row,
                                 fix="use the LLaVA conversation format")
            image = rec.get("image") or rec.get("id")
            if image is None:
                raise InputError("record lacks 'image' and 'id'", path=path, row=row)
            gpt = [t.get("value") for t in rec["conversations"]
                   if isinstance(t, dict) and t.get("from") == "gpt"]
            if not gpt:
                raise InputError("record has no 'gpt' turn to take the caption from", path=path,
                                 row=row)
            meta = json.dumps({"id": rec.get("id")}) if rec.get("id") is not None else None
            yield image, gpt[0], meta

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        yield from self._emit(self._rows(path, load_json_document(path)))


class FuseCapReader(_BatchingReader):
    name = "fusecap"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir() or path.suffix.lower() != ".json":
            return False
        return re.match(rb'\s*\{\s*"[^"]+\.(?:jpg|jpeg|png)"\s*:', head, re.I) is not None

    def _rows(self, path: Path, data):
        if isinstance(data, dict):
            for i, (key, cap) in enumerate(data.items()):
                if not isinstance(cap, str):
                    raise InputError(f"value for {key!r} is not a caption string", path=path,
                                     row=i + 1)
                yield key, cap, None
        elif isinstance(data, list):
            id_col = self.id_col
            cap_col = self.caption_col or "caption"
            for i, rec in enumerate(data):
                if not isinstance(rec, dict):
                    raise InputError("each record must be an object", path=path, row=i + 1)
                key_col = id_col or next((c for c in ("image", "file_name", "image_id", "id")
                                          if c in rec), None)
                if key_col is None or key_col not in rec:
                    raise InputError("record has no image column", path=path, row=i + 1,
                                     fix="pass --id-col")
                if cap_col not in rec:
                    raise InputError(f"record has no '{cap_col}' column", path=path, row=i + 1,
                                     fix="pass --caption-col")
                yield rec[key_col], rec[cap_col], None
        else:
            raise InputError("FuseCap JSON must be a mapping or a list", path=path)

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        yield from self._emit(self._rows(path, load_json_document(path)))
