"""The shards of ``filter run --shards``: which files of a listing are shards, each read
while it is hashed, its cleaned copy hashed while it is written, its completion marker, the
run's claims and summary, and the work folder.

Why here, over :mod:`capaudit.core.storage.paths`: the sharded filter names every file by a
location string (a Ray task receives strings, never a ``Path`` or a file system with its
credentials) and where the data lives must not change a line of the filter. Opening,
listing, writing whole or not at all, stat and removal are the storage layer's, for a disk
and object storage alike; what is a shard's own is here: the suffixes it takes
(:data:`capaudit.io.shard_formats.REWRITTEN_SHARD_SUFFIXES`), its marker (created only if
absent, :mod:`capaudit.io.markers`; an input named by its sha256 on a disk, by its ETag,
size and modification time on object storage), the work folder's lock
(:func:`capaudit.core.storage.work_folder.work_dir_lock`).

Listing (:func:`list_shard_entries`): one file, a folder (every shard under it,
recursively), a glob, or webdataset's brace list (``shard-{00000..00099}.tar``,
:func:`capaudit.core.storage.urls.expand_braces`); each shard with its name relative to the
listing's root, which names its output. Sorted, so a shard's place never depends on the
file system's order.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from typing import IO, Iterator

from capaudit.core.storage import paths
from capaudit.core.storage.listing import list_tree
from capaudit.core.storage.urls import Spec, parse_spec
from capaudit.errors import InputError
from capaudit.io import markers
from capaudit.io.shard_formats import REWRITTEN_SHARD_SUFFIXES

__all__ = ["list_shard_entries", "open_input", "HashingReader",
           "HashingWriter", "fingerprint", "changed", "read_marker", "write_marker",
           "write_json"]


def list_shard_entries(spec: str) -> tuple[list[tuple[str, str, int | None, dict]], Spec]:
    """``(location, name relative to the listing's root, size, identity)`` of every shard
    of ``spec``, sorted by name (:func:`capaudit.core.storage.listing.list_tree`), and the
    spec as read (:class:`capaudit.core.storage.urls.Spec`: how it is shown)."""
    spec = parse_spec(spec)
    shards = [r for r in list_tree(spec) if r[0].endswith(REWRITTEN_SHARD_SUFFIXES)]
    if not shards:
        raise InputError(f"no shards here ({', '.join(REWRITTEN_SHARD_SUFFIXES)})",
                         path=spec.shown_listed,
                         fix="point --shards to webdataset tars, parquet or JSON/JSONL files")
    return sorted(shards, key=lambda s: s[1]), spec


class HashingReader:
    """A binary stream that hashes what is read from it (the shard's sha256, computed while
    it is filtered: the content filtered is the content the marker names)."""

    def __init__(self, fh: IO[bytes]):
        self.fh, self.sha = fh, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.sha.update(data)
        return data

    def readinto(self, buf) -> int:
        n = self.fh.readinto(buf)
        self.sha.update(memoryview(buf)[:n])
        return n

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        """Never: every byte must pass through the hash once (a text wrapper asks)."""
        return False

    def writable(self) -> bool:
        return False

    closed = False

    def close(self) -> None:
        """The underlying file is closed by its opener (:func:`open_input`)."""

    def finish(self) -> str:
        """Read to the end (a reader may stop at a format's end marker) and the sha256."""
        while self.read(1 << 20):
            pass
        return self.sha.hexdigest()


class HashingWriter:
    """A binary sink that hashes and counts what is written (the output's sha256 and size,
    recorded in the shard's marker and summary)."""

    def __init__(self, fh: IO[bytes]):
        self.fh, self.sha, self.size = fh, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.fh.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.fh.flush()

    def writable(self) -> bool:
        return True

    closed = False

    def close(self) -> None:
        """The underlying file is closed (and published) by :func:`atomic_output`."""


@contextmanager
def open_input(path: str) -> Iterator[IO[bytes]]:
    """A shard opened as a binary stream (a remote one read in retried blocks, never
    downloaded whole); a fault is one line naming it."""
    try:
        fh = paths.open_binary(path)
    except OSError as exc:
        raise InputError(f"cannot read the shard ({exc.strerror or exc})", path=path,
                         fix="check the file, or pass --skip-bad-shards") from None
    with fh:
        yield fh


def fingerprint(path: str, previous: dict | None = None, known: dict | None = None) -> dict:
    """The input's identity (:func:`capaudit.io.markers.input_fingerprint`): on a disk its
    sha256 and stat (the hash of ``previous`` reused while the stat is unchanged); on object
    storage what the store reports (``known``: from the listing, no request)."""
    return markers.input_fingerprint(path, previous, known=known)


def changed(path: str, fp: dict, sha: str | None = None) -> bool:
    """The input is no longer the one ``fp`` names: its sha256 as read (``sha``) on a disk,
    else its stat; on object storage the identity the store reports now."""
    if paths.store_identifies(path):
        return not markers.same_input(fp, paths.stat_of(path))
    if sha is not None:
        return sha != fp["sha256"]
    return paths.stat_of(path) != {k: fp.get(k) for k in ("size", "mtime_ns", "ctime_ns", "ino")}


def _marker_key(rel: str) -> str:
    """A shard's marker name (:func:`capaudit.io.markers.marker_name` takes the stem):
    its relative name quoted whole, so ``a/x.tar`` and ``b/x.tar`` never share one."""
    from urllib.parse import quote

    return quote(rel, safe="") + ".shard"


def read_marker(folder: str, rel: str) -> dict | None:
    """The shard's marker in ``folder`` (None when absent or unreadable: redone)."""
    try:
        return markers.read_marker(folder, _marker_key(rel))
    except InputError:
        return None


def write_marker(folder: str, rel: str, key: str, data: dict) -> None:
    """The shard's marker, written last and only if absent (the stale one removed first)."""
    markers.write_marker(folder, _marker_key(rel), key, data)


def write_json(path: str, data: dict) -> None:
    """A claim, manifest or summary, written whole (:func:`capaudit.core.storage.paths.
    write_whole`; a local one's parents made)."""
    paths.make_folder(os.path.dirname(path) or ".")
    paths.write_whole(path, json.dumps(data, sort_keys=True, default=str, indent=1).encode())
