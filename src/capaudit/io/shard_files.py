"""Every file access of ``filter run --shards``, in one place, by location strings: a local
path or a URL (``s3://``, ``gs://``; ``hf://`` and ``http(s)://`` to read).

Why one module: the sharded filter lists its input shards, streams each one, writes each
cleaned shard and its log whole or not at all, and keeps completion markers; where the data
lives must not change a line of the filter. So the plan, the tasks and the driver name
files by strings (a Ray task receives strings, never a ``Path`` or a file system with its
credentials) and everything below goes through the one I/O layer: reads through
:func:`capaudit.core.storage.open_input` (streamed in blocks, retried), outputs through the
one writer's rules on a disk (temporary name, rename) and :mod:`capaudit.core.remote_write`
on object storage (an upload committed only when the block ends cleanly, discarded on an
error: no temporary key, no rename), markers through :mod:`capaudit.io.markers` (created
only if absent; an input named by its sha256 on a disk, by its ETag, size and modification
time on object storage), the work folder's lock through :mod:`capaudit.io.work_dir`.
fsspec is imported only when a location is a URL.

Listing (:func:`list_shard_entries`): one file, a folder (every shard under it,
recursively), a glob, or webdataset's brace list (``shard-{00000..00099}.tar``,
:func:`capaudit.core.urls.expand_braces`); each shard with its name relative to the
listing's root, which names its output. Sorted, so a shard's place never depends on the
file system's order.
"""

from __future__ import annotations

import glob
import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from capaudit.core.storage import is_remote
from capaudit.core.urls import expand_braces, has_glob, join, shown_url
from capaudit.errors import InputError
from capaudit.io.shard_outputs import *  # noqa: F401,F403  (the outputs' half)
from capaudit.io.shard_outputs import __all__ as _OUTPUTS

__all__ = ["SHARD_SUFFIXES", "expand_braces", "list_shards", "list_shard_entries",
           "open_input", "HashingReader", "fingerprint", "changed", "stat_of", "local_head", "is_remote", "join",
           "shown_url", *_OUTPUTS]

SHARD_SUFFIXES = (".tar", ".parquet", ".json", ".jsonl", ".ndjson", ".csv", ".tsv")


def _root(spec: str) -> str:
    """The folder a glob's or a brace list's names are relative to: its part before the
    first wildcard or brace, up to the last separator."""
    cut = min((i for i, ch in enumerate(spec) if ch in "*?[{"), default=len(spec))
    return os.path.dirname(spec[:cut]) or "."


def _local(spec: str) -> tuple[list[str], str] | None:
    """The files of a local spec and their root (None: ``spec`` is one file)."""
    if "{" in spec:
        paths = [p for s in expand_braces(spec)
                 for p in (sorted(glob.glob(s)) if has_glob(s) else [s])]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise InputError(f"{len(missing):,} shard(s) of the brace list are missing, "
                             f"the first {missing[0]}", path=spec, fix="check --shards")
        return paths, _root(spec)
    if has_glob(spec):
        return sorted(glob.glob(spec, recursive=True)), _root(spec)
    if os.path.isdir(spec):
        return sorted(str(p) for p in Path(spec).rglob("*") if p.is_file()
                      and not p.name.startswith(".")), spec
    if os.path.isfile(spec):
        return None
    raise InputError("no such shard folder, file, glob or brace list", path=spec,
                     fix="check --shards")


def _remote(spec: str) -> tuple[list, str] | None:
    """The entries (:class:`capaudit.core.listing.Entry`) of a URL spec and their root
    (None: one object). Listed with narrow prefixes; a folder recursively."""
    from capaudit.core.listing import list_files

    if "{" in spec or has_glob(spec):
        return list_files(spec), _root(spec)
    entries = list_files(spec, recursive=True)
    if len(entries) == 1 and entries[0].location.rstrip("/") == spec.rstrip("/"):
        return None
    return [e for e in entries if not e.name.startswith(".")], spec.rstrip("/")


def list_shard_entries(spec: str) -> list[tuple[str, str, int | None, dict]]:
    """``(location, name relative to the listing's root, size, identity)`` of every shard
    of ``spec``, sorted by name; the identity (ETag, size, modification time) is what the
    store reported while listing (empty for a local file: its marker hashes it)."""
    spec = str(spec)
    if is_remote(spec):
        from capaudit.core.listing import list_files

        found = _remote(spec)
        if found is None:
            e = list_files(spec)[0]
            return [(e.location, e.name, e.size, dict(e.identity))]
        entries, root = found
        rows = [(e.location, e.location[len(root):].lstrip("/") if e.location.startswith(
            root + "/") else e.name, e.size, dict(e.identity)) for e in entries]
    else:
        spec = spec if "://" not in spec else spec[len("file://"):]   # file:///PATH: PATH
        found = _local(spec)
        if found is None:
            return [(spec, os.path.basename(spec), os.stat(spec).st_size, {})]
        paths, root = found
        rows = [(p, os.path.relpath(p, root), os.stat(p).st_size, {}) for p in paths
                if os.path.isfile(p)]
    shards = [r for r in rows if r[0].endswith(SHARD_SUFFIXES)]
    if not shards:
        raise InputError(f"no shards here ({', '.join(SHARD_SUFFIXES)})", path=shown_url(spec),
                         fix="point --shards to webdataset tars, parquet or JSON/JSONL files")
    return sorted(shards, key=lambda s: s[1])


def list_shards(spec: str) -> list[tuple[str, str]]:
    """``(location, name relative to the listing's root)`` of every shard of ``spec``."""
    return [(loc, rel) for loc, rel, _, _ in list_shard_entries(spec)]


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

    closed = False

    def close(self) -> None:
        """The underlying file is closed by its opener (:func:`open_input`)."""

    def finish(self) -> str:
        """Read to the end (a reader may stop at a format's end marker) and the sha256."""
        while self.read(1 << 20):
            pass
        return self.sha.hexdigest()


@contextmanager
def open_input(path: str) -> Iterator[IO[bytes]]:
    """A shard opened as a binary stream (a remote one read in retried blocks, never
    downloaded whole); a fault is one line naming it."""
    from capaudit.core.storage import open_input as open_location

    if is_remote(path):
        fh = open_location(path)
    else:
        try:
            fh = open(path, "rb")
        except OSError as exc:
            raise InputError(f"cannot read the shard ({exc.strerror or exc})", path=path,
                             fix="check the file, or pass --skip-bad-shards") from None
    with fh:
        yield fh


def fingerprint(path: str, previous: dict | None = None, known: dict | None = None) -> dict:
    """The input's identity (:func:`capaudit.io.markers.input_fingerprint`): on a disk its
    sha256 and stat (the hash of ``previous`` reused while the stat is unchanged); on object
    storage what the store reports (``known``: from the listing, no request)."""
    from capaudit.io.markers import input_fingerprint

    return input_fingerprint(path, previous, known=known)


def stat_of(path: str) -> dict:
    """A disk file's stat, or an object's identity read fresh (no cached listing)."""
    if is_remote(path):
        from capaudit.core.storage import filesystem, identity

        fs, key = filesystem(path)
        fs.invalidate_cache(key)
        return identity(path)
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino}


def changed(path: str, fp: dict, sha: str | None = None) -> bool:
    """The input is no longer the one ``fp`` names: its sha256 as read (``sha``) on a disk,
    else its stat; on object storage the identity the store reports now."""
    from capaudit.io.markers import same_input

    if is_remote(path):
        return not same_input(fp, stat_of(path))
    if sha is not None:
        return sha != fp["sha256"]
    return stat_of(path) != {k: fp.get(k) for k in ("size", "mtime_ns", "ctime_ns", "ino")}




@contextmanager
def local_head(path: str, n: int = 1 << 16) -> Iterator[str]:
    """A local path to sniff a shard's format on: the file itself, or for a URL a private
    temporary file of the same name holding its first ``n`` bytes (one ranged read)."""
    if not is_remote(path):
        yield path
        return
    import shutil
    import tempfile

    from capaudit.core.urls import name_of

    folder = tempfile.mkdtemp(prefix="capaudit-head-")
    try:
        local = os.path.join(folder, name_of(path))
        with open_input(path) as src, open(local, "wb") as dst:
            dst.write(src.read(n))
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)
