"""Completion markers and atomic writes: how every shard-by-shard command resumes exactly.

Why one module: ``enrich``, ``detect``, ``annotations detect`` and ``audit run --shards``
all write a shard's output whole (a temporary name renamed into place on a disk; an upload
committed only when complete on object storage, :mod:`capaudit.core.storage.remote_write`) and only
then a marker holding the counts, the hash of the configuration and the identity of the
input. A rerun skips the shards whose marker matches, so a killed run is neither lost nor
duplicated.

The marker folder is a path or a URL (:class:`capaudit.core.storage.folder.Folder`). A marker is
created only if absent (a conditional create: ``If-None-Match`` on S3, a hard link on a
disk), after the stale one of an earlier run is removed. An input's identity is its sha256
on a disk (reused while its size, mtime, ctime and inode stay the same) and, on object
storage, what the store reports without a read: size, ETag or checksum, modification time
(:func:`capaudit.core.storage.fs.identity`); :func:`same_input` compares either.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

from capaudit.core.storage.folder import Folder
from capaudit.core.storage.urls import local_path, name_of, shown_url
from capaudit.errors import InputError

__all__ = ["MARKER_SUFFIX", "config_hash", "marker_path", "marker_name",
           "write_marker", "read_marker", "input_fingerprint", "same_input", "matches",
           "clean_tmp", "as_folder"]

MARKER_SUFFIX = ".done.json"
# what names an object's content, strongest first (size is compared with any of them)
_CONTENT_KEYS = ("sha256", "etag", "md5hash", "crc32c", "checksum", "oid", "blob_id",
                 "versionid", "generation")


def config_hash(config: Mapping) -> str:
    """Stable short hash of a JSON-able configuration (key order does not matter)."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def as_folder(out_dir, storage_options: dict | None = None) -> Folder:
    return out_dir if isinstance(out_dir, Folder) else Folder(out_dir, storage_options)


def marker_name(shard_name: str) -> str:
    return Path(name_of(shard_name)).stem + MARKER_SUFFIX


def marker_path(out_dir, shard_name: str):
    """The marker's location (a Path in a local folder, else a URL)."""
    folder = as_folder(out_dir)
    name = marker_name(shard_name)
    return folder.local / name if folder.local is not None else folder.url(name)


def write_marker(out_dir, shard_name: str, cfg_hash: str, counts: Mapping, *,
                 stale: bool = True):
    """The completion marker: written last, so its presence means the shard is whole; a
    stale marker is removed first (``stale=False``: the caller read none, one request
    fewer) and the new one created only if absent."""
    from capaudit.core.storage.remote_write import Exists

    folder, name = as_folder(out_dir), marker_name(shard_name)
    data = json.dumps({"shard": name_of(shard_name), "config_hash": cfg_hash, **counts},
                      sort_keys=True, default=str).encode()
    if stale:
        folder.remove(name)
    try:
        try:
            folder.write_bytes(name, data, exclusive=True)
        except Exists:
            if stale:
                raise
            folder.remove(name)   # a marker the caller could not read (damaged): replaced
            folder.write_bytes(name, data, exclusive=True)
    except Exists:
        raise InputError("another capaudit run marked this shard done meanwhile",
                         path=shown_url(folder.url(name)),
                         fix="run one capaudit per work folder") from None
    return marker_path(folder, shard_name)


def read_marker(out_dir, shard_name: str) -> dict | None:
    data = as_folder(out_dir).read_bytes(marker_name(shard_name))
    if data is None:
        return None
    try:
        marker = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # a torn marker cannot happen with atomic writes; treat as missing
    return marker if isinstance(marker, dict) else None


def input_fingerprint(location, previous: Mapping | None = None, *,
                      known: Mapping | None = None, storage_options: dict | None = None) -> dict:
    """What a completion marker records of its input shard.

    A local file: sha256 plus its stat. The sha256 keys the marker to the input's
    content (a shard rebuilt in the same folder is redone); the stat (size, mtime,
    ctime, inode) lets a rerun reuse ``previous``'s hash without reading the file
    again when nothing about it changed. A touched or copied but identical shard
    hashes the same. A remote object: its identity as the store reports it
    (``known``: from the listing, no request), never a second read of its bytes.
    """
    path = local_path(location)
    if path is None:
        if known:
            return dict(known)
        from capaudit.core.storage.fs import identity

        return identity(str(location), storage_options)
    from capaudit.io.ingest import fingerprint

    st = Path(path).stat()
    stat = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino}
    if previous and previous.get("sha256") and all(previous.get(k) == v for k, v in stat.items()):
        return {**stat, "sha256": previous["sha256"]}
    return {**stat, "sha256": fingerprint(Path(path))}


def same_input(recorded: Mapping | None, current: Mapping) -> bool:
    """The input a marker recorded is the one there now: same sha256 (a local file), or
    same size and content key (ETag, checksum, version) as the store reports it. Without
    any content key nothing can be told, and the shard is redone."""
    if not recorded:
        return False
    for key in _CONTENT_KEYS:
        if current.get(key) is not None:
            return recorded.get(key) == current[key] and (
                key == "sha256" or recorded.get("size") == current.get("size"))
    return False


def matches(marker: Mapping | None, cfg_hash: str, current: Mapping) -> bool:
    """``marker`` marks this configuration done over the input there now."""
    return bool(marker) and marker.get("config_hash") == cfg_hash and \
        same_input(marker.get("input"), current)


def clean_tmp(out_dir) -> int:
    """Remove leftovers of killed writers (``*.tmp-PID``) in a local folder; returns how
    many. (Object storage has none: an unfinished upload is never an object.)"""
    folder = as_folder(out_dir)
    if folder.local is None:
        return 0
    n = 0
    for p in Path(folder.local).glob("*.tmp-*"):
        p.unlink(missing_ok=True)
        n += 1
    return n
