"""Webdataset shards of images and their captions: the unit of work for enrichment and
detection (the captions-only shards of a sharded audit are :mod:`capaudit.io.caption_shards`).

Why shards: a run over a million images must survive being killed at any
moment. Each shard is processed as a whole, its output written under a
temporary name and renamed into place, and only then marked done
(:mod:`capaudit.io.markers`), so work is neither lost nor duplicated.

Two layouts are read, both as plain tar files (``KEY.EXT`` members, grouped
by key): the one ``capaudit shards build`` writes (``KEY.jpg`` + ``KEY.json``
with ``image_id`` and ``captions``) and the one img2dataset writes
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
from capaudit.io.markers import clean_tmp, config_hash, is_done, write_marker
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
    from capaudit.core.storage.urls import on_disk

    if not on_disk(path):
        from capaudit.core.storage.listing import list_files

        found = [e.location for e in list_files(str(path), manifest=True)
                 if e.name.endswith(".tar")]
        if not found:
            raise InputError("no .tar shards here", path=_shown(path),
                             fix="point --shards to a webdataset folder or .tar files")
        return found
    path = Path(path)
    if not path.exists():
        raise InputError("no such shard folder or file", path=path, fix="check --shards")
    return shard_paths(path)


def _shown(location) -> str:
    from capaudit.core.storage.urls import shown_url

    return shown_url(location)


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
def write_shard(out_dir: Path, shard_name: str, samples: Iterable[Sample],
                cfg_hash: str) -> dict:
    """Write ``shard_name`` (.tar), its parquet index and its marker, atomically."""
    out_dir = Path(out_dir)
    buf = io.BytesIO()
    rows = {"key": [], "image_id": [], "file_name": [], "n_captions": [], "image_sha256": []}
    with open_writer(buf, USTAR) as tf:   # USTAR, mtime 0: byte-identical reruns
        for s in samples:
            add_file(tf, f"{s.key}.{s.image_ext}", s.image or b"")
            meta = {**s.meta, "image_id": s.image_id, "captions": s.captions}
            add_file(tf, f"{s.key}.json", json.dumps(meta, sort_keys=True).encode())
            rows["key"].append(s.key)
            rows["image_id"].append(s.image_id)
            rows["file_name"].append(s.meta.get("file_name"))
            rows["n_captions"].append(len(s.captions))
            rows["image_sha256"].append(s.image_sha256)
    tar_path = out_dir / shard_name
    write_whole(tar_path, buf.getvalue())
    index = pa.table({"key": pa.array(rows["key"], pa.string()),
                      "image_id": pa.array(rows["image_id"], pa.int64()),
                      "file_name": pa.array(rows["file_name"], pa.string()),
                      "n_captions": pa.array(rows["n_captions"], pa.int32()),
                      "image_sha256": pa.array(rows["image_sha256"], pa.string())})
    write_whole(tar_path.with_suffix(".parquet"), table_bytes(index))
    counts = {"samples": len(rows["key"]), "captions": sum(rows["n_captions"])}
    write_marker(out_dir, shard_name, cfg_hash, counts)
    return counts


def _group_captions(captions: pa.Table) -> tuple[dict, dict, dict]:
    """Captions by image id and by key, and each image's namespace (by id and by key)."""
    by_id: dict[int, list[str]] = {}
    by_key: dict[str, list[str]] = {}
    spaces: dict = {}
    names = captions.column("namespace").to_pylist() if "namespace" in \
        captions.column_names else [None] * captions.num_rows
    for key, iid, cap, ns in zip(captions.column("image_key").to_pylist(),
                                 captions.column("image_id").to_pylist(),
                                 captions.column("caption").to_pylist(), names):
        if iid is not None:
            by_id.setdefault(int(iid), []).append(cap)
            spaces.setdefault(int(iid), ns)
        by_key.setdefault(str(key), []).append(cap)
        spaces.setdefault(str(key), ns)
    return by_id, by_key, spaces


def build_shards(images_dir: str | Path, captions: pa.Table, out_dir: str | Path, *,
                 shard_size: int = 1000, set_name: str = "", on_shard=None) -> dict:
    """Pair images (named by COCO file name or key) with captions and write shards.

    Images without a caption are skipped and counted, never silently: the
    returned summary says how many. Resumable: shards whose marker matches
    are kept as they are.
    """
    images_dir, out_dir = Path(images_dir), Path(out_dir)
    if not images_dir.is_dir():
        raise InputError("not a folder of images", path=images_dir, fix="pass --images DIR")
    if shard_size < 1:
        raise InputError("--shard-size must be at least 1")
    out_dir.mkdir(parents=True, exist_ok=True)
    clean_tmp(out_dir)
    by_id, by_key, spaces = _group_captions(captions)
    files = sorted(p for p in images_dir.iterdir()
                   if p.is_file() and p.suffix.lower().lstrip(".") in IMAGE_EXTS)
    if not files:
        raise InputError("no images (.jpg/.png/...) in this folder", path=images_dir)
    paired, unmatched = [], []
    for p in files:
        iid = parse_image_id(p.name)
        caps = by_id.get(iid) if iid is not None else None
        caps, ns = ((caps, spaces.get(iid)) if caps else next(
            ((by_key[k], spaces.get(k)) for k in (p.name, p.stem) if k in by_key), (None, None)))
        (paired if caps else unmatched).append((p, iid, caps, ns))
    if not paired:
        raise InputError(f"no image in this folder matches a caption of set '{set_name}'",
                         path=images_dir, fix="name images by COCO file name or caption key")
    cfg = config_hash({"set": set_name, "shard_size": shard_size,
                       "files": [p.name for p, *_ in paired]})
    summary = {"shards": 0, "written": 0, "skipped_done": 0, "samples": len(paired),
               "unmatched_images": len(unmatched), "config_hash": cfg}
    for start in range(0, len(paired), shard_size):
        name = f"shard-{start // shard_size:05d}.tar"
        summary["shards"] += 1
        if is_done(out_dir, name, cfg):
            summary["skipped_done"] += 1
        else:
            chunk = paired[start:start + shard_size]
            # the set's namespace goes with each image: read back, the ids keep their dataset
            samples = (Sample(key=f"{iid:012d}" if iid is not None else p.stem, image_id=iid,
                              image=p.read_bytes(), image_ext=p.suffix.lower().lstrip("."),
                              captions=list(caps), meta={"file_name": p.name, **(
                                  {"namespace": ns} if ns else {})})
                       for p, iid, caps, ns in chunk)
            write_shard(out_dir, name, samples, cfg)
            summary["written"] += 1
        if on_shard:
            on_shard(name)
    write_whole(out_dir / "manifest.json", json.dumps(
        {"captions_set": set_name, "shard_size": shard_size, **summary}, sort_keys=True,
        indent=1).encode())
    return summary


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
