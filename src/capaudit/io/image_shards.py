"""Webdataset shards of images and their captions: the unit of work for enrichment and
detection (the captions-only shards of a sharded audit are :mod:`capaudit.io.caption_shards`).

Why shards: a run over a million images must survive being killed at any
moment. Each shard is processed as a whole, its output written under a
temporary name and renamed into place, and only then marked done
(:mod:`capaudit.io.markers`), so work is neither lost nor duplicated.

Two layouts are read, both as plain tar files (``KEY.EXT`` members, grouped
by key): the one ``capaudit shards build`` writes (``KEY.jpg`` + ``KEY.json``
with ``image_id`` and ``captions``: :func:`write_shard`, run per shard by
:mod:`capaudit.enrich.shards_build`) and the one img2dataset writes
(``KEY.jpg``, ``KEY.txt``, ``KEY.json`` with ``caption``/``key``).
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa

from capaudit.core.storage.paths import write_whole
from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.markers import write_marker
from capaudit.io.layouts.parquet import table_bytes
from capaudit.io.layouts.tar import IMAGE_EXTS, USTAR, add_file, iter_samples, open_writer
from capaudit.io.readers.webdataset import parse_sample, shard_paths


@dataclass
class Sample:
    """One image with its captions, as read from a shard."""

    key: str
    image_id: int | None
    image: bytes | None
    image_ext: str | None
    captions: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def image_sha256(self) -> str | None:
        return hashlib.sha256(self.image).hexdigest() if self.image is not None else None


# -- reading ------------------------------------------------------------------------
def list_shards(path: str | Path) -> list:
    """The ``.tar`` shards of a folder or one shard: local ``Path`` objects, or URL strings
    for a remote folder, glob, brace list or manifest (:mod:`capaudit.core.storage.listing`)."""
    from capaudit.core.storage.urls import on_disk, shown_url

    if not on_disk(path):
        from capaudit.core.storage.listing import list_files

        found = [e.location for e in list_files(str(path), manifest=True)
                 if e.name.endswith(".tar")]
        if not found:
            raise InputError("no .tar shards here", path=shown_url(path),
                             fix="point --shards to a webdataset folder or .tar files")
        return found
    path = Path(path)
    if not path.exists():
        raise InputError("no such shard folder or file", path=path, fix="check --shards")
    return shard_paths(path)


def read_shard(tar_path: str | Path) -> Iterator[Sample]:
    """Yield the samples of one shard in tar order (both layouts, see module doc); a URL is
    read streaming (:func:`capaudit.core.storage.paths.readable`)."""
    from capaudit.core.storage.paths import readable

    with readable(tar_path) as (shown, source):
        yield from _samples(shown, source)


def _samples(tar_path, fileobj) -> Iterator[Sample]:
    for row, (key, files) in enumerate(iter_samples(tar_path, fileobj=fileobj), start=1):
        meta, caps = parse_sample(key, files, tar_path, row, strict=False)
        caps = [c for c in caps if isinstance(c, str)]
        ext = next((e for e in IMAGE_EXTS if e in files), None)
        iid = meta.get("image_id")
        iid = parse_image_id(iid) if iid is not None else parse_image_id(key)
        yield Sample(key=key, image_id=iid, image=files.get(ext) if ext else None,
                     image_ext=ext, captions=caps, meta=meta)


# -- writing ------------------------------------------------------------------------
_INDEX = pa.schema([("key", pa.string()), ("image_id", pa.int64()), ("file_name", pa.string()),
                    ("n_captions", pa.int32()), ("image_sha256", pa.string())])


def write_shard(out_dir: Path, shard_name: str, samples: Iterable[Sample],
                cfg_hash: str, marked: dict | None = None) -> dict:
    """Write ``shard_name`` (.tar), its parquet index and its marker (the counts, and
    ``marked``: what the shard was built from), atomically; returns the counts."""
    out_dir, buf, rows = Path(out_dir), io.BytesIO(), []
    with open_writer(buf, USTAR) as tf:   # USTAR, mtime 0: byte-identical reruns
        for s in samples:
            add_file(tf, f"{s.key}.{s.image_ext}", s.image or b"")
            meta = {**s.meta, "image_id": s.image_id, "captions": s.captions}
            add_file(tf, f"{s.key}.json", json.dumps(meta, sort_keys=True).encode())
            rows.append({"key": s.key, "image_id": s.image_id, "file_name": s.meta.get(
                "file_name"), "n_captions": len(s.captions), "image_sha256": s.image_sha256})
    tar_path = out_dir / shard_name
    write_whole(tar_path, buf.getvalue())
    write_whole(tar_path.with_suffix(".parquet"), table_bytes(pa.Table.from_pylist(rows, _INDEX)))
    counts = {"samples": len(rows), "captions": sum(r["n_captions"] for r in rows)}
    write_marker(out_dir, shard_name, cfg_hash, {**counts, **(marked or {})})
    return counts


def read_manifest(shards_dir: str | Path) -> dict:
    """The ``manifest.json`` that ``shards build`` writes (empty for foreign shards)."""
    from capaudit.core.storage.folder import Folder
    from capaudit.core.storage.urls import has_glob

    if "{" in str(shards_dir) or has_glob(str(shards_dir)) or str(shards_dir).endswith(".tar"):
        return {}
    try:
        data = Folder(shards_dir).read_bytes("manifest.json")
        return json.loads(data.decode("utf-8")) if data else {}
    except (json.JSONDecodeError, UnicodeDecodeError, IsADirectoryError, NotADirectoryError,
            InputError):
        return {}
