"""Completion markers and atomic writes: how every shard-by-shard command resumes exactly.

Why one module: ``enrich``, ``detect``, ``annotations detect`` and ``audit run --shards``
all write a shard's output under a temporary name, rename it into place (atomic on one
file system) and only then write a marker holding the counts, the hash of the
configuration and the fingerprint of the input. A rerun skips the shards whose marker
matches, so a killed run is neither lost nor duplicated.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

__all__ = ["MARKER_SUFFIX", "config_hash", "atomic_write_bytes", "marker_path", "write_marker",
           "read_marker", "is_done", "input_fingerprint", "clean_tmp"]

MARKER_SUFFIX = ".done.json"


def config_hash(config: Mapping) -> str:
    """Stable short hash of a JSON-able configuration (key order does not matter)."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a fresh ``.NAME.tmp-PID-RANDOM`` (never through a link), fsync, rename:
    readers never see half a file (:mod:`capaudit.core.safe_write`)."""
    from capaudit.core.safe_write import write_bytes

    write_bytes(path, data)


def marker_path(out_dir: Path, shard_name: str) -> Path:
    return Path(out_dir) / (Path(shard_name).stem + MARKER_SUFFIX)


def write_marker(out_dir: Path, shard_name: str, cfg_hash: str, counts: Mapping) -> Path:
    """The completion marker: written last, so its presence means the shard is whole."""
    path = marker_path(out_dir, shard_name)
    atomic_write_bytes(path, json.dumps({"shard": shard_name, "config_hash": cfg_hash,
                                         **counts}, sort_keys=True, default=str).encode())
    return path


def read_marker(out_dir: Path, shard_name: str) -> dict | None:
    path = marker_path(out_dir, shard_name)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # a torn marker cannot happen with atomic writes; treat as missing


def is_done(out_dir: Path, shard_name: str, cfg_hash: str) -> bool:
    marker = read_marker(out_dir, shard_name)
    return bool(marker and marker.get("config_hash") == cfg_hash)


def input_fingerprint(path: Path, previous: Mapping | None = None) -> dict:
    """What a completion marker records of its input shard: sha256 plus the file's stat.

    The sha256 keys the marker to the input's content (a shard rebuilt in the
    same folder is redone); the stat (size, mtime, ctime, inode) lets a rerun
    reuse ``previous``'s hash without reading the file again when nothing
    about it changed. A touched or copied but identical shard hashes the same.
    """
    from capaudit.io.ingest import fingerprint

    st = Path(path).stat()
    stat = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino}
    if previous and previous.get("sha256") and all(previous.get(k) == v for k, v in stat.items()):
        return {**stat, "sha256": previous["sha256"]}
    return {**stat, "sha256": fingerprint(Path(path))}


def clean_tmp(out_dir: Path) -> int:
    """Remove leftovers of killed writers (``*.tmp-PID``); returns how many."""
    n = 0
    for p in Path(out_dir).glob("*.tmp-*"):
        p.unlink(missing_ok=True)
        n += 1
    return n
