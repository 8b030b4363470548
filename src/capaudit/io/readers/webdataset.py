"""Captions from webdataset tar shards (as img2dataset or ``capaudit shards build`` write them).

Samples are grouped by key (the file name without its extensions). A sample's
caption comes from ``KEY.txt`` or from ``KEY.json`` (``caption``, or a
``captions`` list giving one row per caption); its image id from the JSON's
``image_id``, else from the key. Images are not read here.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.readers.base import CaptionReader, make_batch


def shard_paths(path: Path) -> list[Path]:
    if path.is_dir():
        shards = sorted(p for p in path.iterdir() if p.suffix == ".tar")
        if not shards:
            raise InputError("no .tar shards in this folder", path=path,
                             fix="point to a webdataset folder or a .tar file")
        return shards
    return [path]


def iter_samples(tar_path: Path) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Yield (key, {extension: bytes}) per sample, in tar order."""
    try:
        tf = tarfile.open(tar_path, "r")
    except (tarfile.TarError, OSError) as exc:
        raise InputError(f"not a readable tar shard ({exc})", path=tar_path) from None
    current, files = None, {}
    with tf:
        for member in tf:
            if not member.isfile():
                continue
            name = member.name.rsplit("/", 1)[-1]
            if "." not in name:
                continue
            key, ext = name.split(".", 1)
            prefix = member.name[: -len(name)]
            key = prefix + key
            if current is not None and key != current:
                yield current, files
                files = {}
            current = key
            files[ext] = tf.extractfile(member).read()
        if current is not None:
            yield current, files


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
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise InputError(f"sample '{key}' has malformed JSON", path=shard, row=row) from None
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

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return any(p.suffix == ".tar" for p in path.iterdir())
        return path.suffix == ".tar"

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        cap_key = self.caption_col or "caption"
        keys, ids, caps, metas = [], [], [], []
        for shard in shard_paths(path):
            for row, (key, files) in enumerate(iter_samples(shard), start=1):
                meta, texts = parse_sample(key, files, shard, row, cap_key)
                iid = meta.get(self.id_col or "image_id")
                iid = parse_image_id(iid) if iid is not None else parse_image_id(key)
                for text in texts:
                    keys.append(str(meta.get("key", key)) if iid is None else str(iid))
                    ids.append(iid)
                    caps.append(text if isinstance(text, str) else None)
                    metas.append(json.dumps({"shard": shard.name, "key": key}))
                if len(keys) >= self.batch_size:
                    yield make_batch(keys, ids, caps, metas)
                    keys, ids, caps, metas = [], [], [], []
        if keys:
            yield make_batch(keys, ids, caps, metas)
