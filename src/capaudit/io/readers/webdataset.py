"""Captions from webdataset tar shards (as img2dataset or ``capaudit shards build`` write them).

Samples are grouped by key (the file name without its extensions). A sample's
caption comes from ``KEY.txt`` or from ``KEY.json`` (``caption``, or a
``captions`` list giving one row per caption); its image id from the JSON's
``image_id``, else from the key. Images are not read here;
the tar itself is read by the layout's one reader (:mod:`capaudit.io.layouts.tar`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import (infer_namespace, is_digit_key, is_row_key, key_image_id,
                                  parse_image_id)
from capaudit.io.readers.base import CaptionReader, row_batches


def shard_paths(path: Path) -> list[Path]:
    if path.is_dir():
        shards = sorted(p for p in path.iterdir() if p.suffix == ".tar")
        if not shards:
            raise InputError("no .tar shards in this folder", path=path,
                             fix="point to a webdataset folder or a .tar file")
        return shards
    return [path]


def parse_sample(key: str, files: dict[str, bytes], shard: Path, row: int,
                 caption_key: str = "caption", strict: bool = True) -> tuple[dict, list]:
    """A sample's JSON metadata and captions (``captions`` list, ``caption``, or ``.txt``).

    ``strict`` (reading captions) refuses a sample without a caption or with a
    non-UTF-8 ``.txt``; shard readers that only need images pass ``False``.
    """
    meta: dict = {}
    if "json" in files:
        try:
            meta = json.loads(files["json"].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise InputError(f"sample '{key}' has malformed JSON", path=shard, row=row) from None
        if not isinstance(meta, dict):
            raise InputError(f"sample '{key}' JSON is not an object", path=shard, row=row)
    if isinstance(meta.get("captions"), list):
        return meta, meta["captions"]
    if caption_key in meta:
        return meta, [meta[caption_key]]
    if "txt" in files:
        try:
            return meta, [files["txt"].decode("utf-8")]
        except UnicodeDecodeError:
            if strict:
                raise InputError(f"sample '{key}' caption is not UTF-8", path=shard,
                                 row=row) from None
            return meta, [files["txt"].decode("utf-8", errors="replace")]
    if strict:
        raise InputError(f"sample '{key}' has no caption (.txt or .json)", path=shard, row=row)
    return meta, []


class WebDatasetReader(CaptionReader):
    name = "webdataset"
    accepts = frozenset({"id_col", "caption_col"})   # the JSON's id field, its caption key

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return any(p.suffix == ".tar" for p in path.iterdir())
        return path.suffix == ".tar"

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        yield from row_batches(self._rows(path), self)

    def _rows(self, path: Path) -> Iterator[tuple]:
        # here, not at the top: every caption file's format sniff imports this module
        from capaudit.io.layouts.tar import iter_samples

        cap_key = self.caption_col or "caption"
        for shard in shard_paths(path):
            for row, (key, files) in enumerate(iter_samples(shard), start=1):
                meta, texts = parse_sample(key, files, shard, row, cap_key)
                iid, ns = sample_id(key, meta, self.id_col or "image_id")
                for text in texts:
                    yield (str(meta.get("key", key)) if iid is None else str(iid), iid, text,
                           json.dumps({"shard": shard.name, "key": key}), ns)


def sample_id(key: str, meta: dict, id_field: str) -> tuple[int | None, str | None]:
    """A sample's image id and the namespace its key is evidence for: the JSON's id field,
    else the key (``COCO_val2014_000000011340`` -> 11340, coco2014); an img2dataset row
    number is no image id (:func:`~capaudit.io.imageids.is_row_key`): the key stays text. A
    ``namespace`` in the JSON (``shards build`` writes its set's) is the sample's own."""
    if meta.get(id_field) is not None:
        iid = parse_image_id(meta[id_field])
        ns = meta.get("namespace")
        return iid, (ns if isinstance(ns, str) and ns and iid is not None else None)
    if is_row_key(key, meta):
        return None, None
    iid = key_image_id(key)
    return iid, (None if iid is None or is_digit_key(key) else infer_namespace(key))
