"""Every file access of ``filter run --shards``, in one place, by path strings.

Why one module: the sharded filter lists its input shards, opens each as a binary stream,
writes each cleaned shard and its log under a temporary name and renames it, and keeps
completion markers; on object storage all of that goes through fsspec (URLs, no rename,
no shared disk). Keeping it here, with plain path strings as arguments (never a ``Path``
or an open filesystem held across processes: a Ray task receives strings), makes that
swap local to this module. Local paths for now.

Listing (:func:`list_shards`): one file, a folder (every shard under it, recursively), a
glob, or webdataset's brace list (``shard-{00000..00099}.tar``, :func:`expand_braces`);
each shard with its name relative to the listing's root, which names its output. Sorted,
so a shard's place never depends on the file system's order.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from capaudit.errors import InputError

__all__ = ["SHARD_SUFFIXES", "expand_braces", "list_shards", "open_input", "HashingReader",
           "HashingWriter", "atomic_output", "fingerprint", "stat_of", "read_json", "write_json",
           "file_size", "is_file", "clean_tmp", "path_kind", "real_path", "absolute",
           "remove_file", "remove_empty_dir", "check_out_folder", "work_folder", "work_lock",
           "remove_work_folder"]

SHARD_SUFFIXES = (".tar", ".parquet", ".json", ".jsonl", ".ndjson", ".csv", ".tsv")
_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
MAX_EXPANDED = 1_000_000


def expand_braces(spec: str) -> list[str]:
    """``a-{000..002}.tar`` -> ``a-000.tar a-001.tar a-002.tar`` (the width of a zero-padded
    bound kept); ``{a,b}`` lists; several braces multiply. No brace: ``[spec]``."""
    m = _BRACE.search(spec)
    if m is None:
        return [spec]
    body, head, tail = m.group(1), spec[:m.start()], spec[m.end():]
    rng = _RANGE.match(body)
    if rng:
        lo, hi = int(rng.group(1)), int(rng.group(2))
        width = len(rng.group(1)) if rng.group(1).lstrip("-").startswith("0") else 0
        if abs(hi - lo) >= MAX_EXPANDED:
            raise InputError(f"the brace range {{{body}}} names over {MAX_EXPANDED:,} shards",
                             path=spec, fix="split the corpus over several runs")
        step = 1 if hi >= lo else -1
        items = [str(i).zfill(width) for i in range(lo, hi + step, step)]
    else:
        items = body.split(",")
    return [out for item in items for out in expand_braces(head + item + tail)]


def _root(spec: str) -> str:
    """The folder a glob's or a brace list's names are relative to: its part before the
    first wildcard or brace, up to the last separator."""
    cut = min((i for i, ch in enumerate(spec) if ch in "*?[{"), default=len(spec))
    return os.path.dirname(spec[:cut]) or "."


def list_shards(spec: str) -> list[tuple[str, str]]:
    """``(path, name relative to the listing's root)`` of every shard of ``spec``, sorted."""
    spec = str(spec)
    if "{" in spec:
        paths, root = [p for s in expand_braces(spec) for p in (sorted(glob.glob(s))
                       if any(c in s for c in "*?[") else [s])], _root(spec)
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise InputError(f"{len(missing):,} shard(s) of the brace list are missing, "
                             f"the first {missing[0]}", path=spec, fix="check --shards")
    elif any(c in spec for c in "*?["):
        paths, root = sorted(glob.glob(spec, recursive=True)), _root(spec)
    elif os.path.isdir(spec):
        root = spec
        paths = sorted(str(p) for p in Path(spec).rglob("*") if p.is_file()
                       and not p.name.startswith("."))
    elif os.path.isfile(spec):
        return [(spec, os.path.basename(spec))]
    else:
        raise InputError("no such shard folder, file, glob or brace list", path=spec,
                         fix="check --shards")
    shards = [(p, os.path.relpath(p, root)) for p in paths
              if os.path.isfile(p) and p.endswith(SHARD_SUFFIXES)]
    if not shards:
        raise InputError(f"no shards here ({', '.join(SHARD_SUFFIXES)})", path=spec,
                         fix="point --shards to webdataset tars, parquet or JSON/JSONL files")
    return sorted(shards, key=lambda s: s[1])


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
        """The underlying file is closed (and renamed) by :func:`atomic_output`."""


@contextmanager
def open_input(path: str) -> Iterator[IO[bytes]]:
    """A shard opened as a binary stream; a fault is one line naming it."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read the shard ({exc.strerror or exc})", path=path,
                         fix="check the file, or pass --skip-bad-shards") from None
    with fh:
        yield fh


@contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """A binary handle whose content becomes ``path`` only when the block ends cleanly
    (temporary name beside it, renamed; parents made; never through a link)."""
    from capaudit.core.safe_write import atomic_open

    with atomic_open(path, "wb", parents=True) as fh:
        yield fh


def fingerprint(path: str, previous: dict | None = None) -> dict:
    """The input's sha256 and stat (:func:`capaudit.io.markers.input_fingerprint`: the hash
    of ``previous`` is reused while the stat is unchanged)."""
    from capaudit.io.markers import input_fingerprint

    return input_fingerprint(Path(path), previous)


def stat_of(path: str) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino}


def read_json(path: str) -> dict | None:
    """A marker (None when absent or unreadable: the work is then redone)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: str, data: dict) -> None:
    """A marker or summary, written atomically (temporary name, rename)."""
    from capaudit.core.safe_write import write_text

    write_text(path, json.dumps(data, sort_keys=True, default=str, indent=1), parents=True)


def file_size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def is_file(path: str) -> bool:
    return os.path.isfile(path) and not os.path.islink(path)


def clean_tmp(folder: str, names: list[str]) -> int:
    """Remove what killed writers left of ``names`` (``.NAME.tmp-PID-RANDOM``, the one
    writer's temporary names); returns how many."""
    n = 0
    for name in names:
        head, tail = os.path.split(os.path.join(folder, name))
        for p in glob.glob(os.path.join(glob.escape(head), "." + glob.escape(tail[:120])
                                        + ".tmp-*")):
            if os.path.isfile(p) and not os.path.islink(p):
                os.unlink(p)
                n += 1
    return n


# -- the output folder and the work folder ----------------------------------------------
def path_kind(path: str) -> str:
    """``missing``, ``link``, ``dir`` or ``file`` (a link is never followed)."""
    if os.path.islink(path):
        return "link"
    if os.path.isdir(path):
        return "dir"
    return "file" if os.path.exists(path) else "missing"


def real_path(path: str) -> str:
    return os.path.realpath(path)


def absolute(path: str) -> str:
    return os.path.abspath(path)


def remove_file(path: str) -> None:
    """Remove a file capaudit wrote (never a link's target, never a folder)."""
    if is_file(path):
        os.unlink(path)


def remove_empty_dir(path: str) -> None:
    """Remove a folder only if it is empty."""
    try:
        os.rmdir(path)
    except OSError:
        pass


def check_out_folder(path: str) -> None:
    """The one writer's rules for a folder output (not ``/``, the working folder or a
    link; a file of that name refused)."""
    from capaudit.core.safe_write import check_folder_target

    check_folder_target(path)


def work_folder(store_path: str, name: str) -> str:
    """The default work folder of a run named ``name`` beside the store."""
    from capaudit.io.work_dir import default_work_dir

    return str(default_work_dir(store_path, name, "filter-work"))


@contextmanager
def work_lock(path: str) -> Iterator[str]:
    """The work folder held by this run alone (:func:`capaudit.io.work_dir.work_dir_lock`)."""
    from capaudit.io.work_dir import work_dir_lock

    with work_dir_lock(path) as root:
        yield str(root)


def remove_work_folder(made: str, up_to: str | None = None) -> None:
    """What a successful run made in its work folder (:func:`capaudit.io.work_dir.remove_work`)."""
    from capaudit.io.work_dir import remove_work

    remove_work(made, up_to=up_to)
