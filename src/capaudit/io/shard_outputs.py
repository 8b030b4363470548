"""The outputs of ``filter run --shards``: cleaned shards, logs, claims, manifests, markers
and the work folder, by location strings (a local path or a URL).

Why apart from :mod:`capaudit.io.shard_files` (which re-exports all of this, so the filter
still sees one module): reading a corpus and writing its cleaned copy are two halves of one
promise, each through the one I/O layer. Here: an output appears whole or not at all (a
temporary name renamed on a disk, :mod:`capaudit.core.safe_write`; an upload committed only
when complete on object storage, :mod:`capaudit.core.remote_write`: no temporary key, no
rename); a marker is created only if absent (:mod:`capaudit.io.markers`); the work folder
is held by one run (:mod:`capaudit.io.work_dir`: ``flock`` on a disk, a lock object on
object storage). A link is never followed on a disk; object storage has none.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from contextlib import contextmanager
from typing import IO, Iterator

from capaudit.core.storage import is_remote
from capaudit.core.urls import name_of, parent_of
from capaudit.errors import InputError

__all__ = ["HashingWriter", "atomic_output", "read_marker", "write_marker", "read_json",
           "write_json", "file_size", "is_file", "clean_tmp", "path_kind", "real_path",
           "absolute", "inside", "remove_file", "remove_empty_dir", "make_folder",
           "check_out_folder", "work_folder", "work_lock", "remove_work_folder"]


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
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """A binary handle whose content becomes ``path`` only when the block ends cleanly: on
    a disk a temporary name beside it, renamed (parents made, never through a link); on
    object storage an upload committed then, discarded otherwise."""
    if is_remote(path):
        from capaudit.core.remote_write import open_output

        with open_output(path) as fh:
            yield fh
        return
    from capaudit.core.safe_write import atomic_open

    with atomic_open(path, "wb", parents=True) as fh:
        yield fh


def _marker_key(rel: str) -> str:
    """A shard's marker name (:func:`capaudit.io.markers.marker_name` takes the stem):
    its relative name quoted whole, so ``a/x.tar`` and ``b/x.tar`` never share one."""
    from urllib.parse import quote

    return quote(rel, safe="") + ".shard"


def read_marker(folder: str, rel: str) -> dict | None:
    """The shard's marker in ``folder`` (None when absent or unreadable: redone)."""
    from capaudit.io.markers import read_marker as read

    try:
        return read(folder, _marker_key(rel))
    except InputError:
        return None


def write_marker(folder: str, rel: str, key: str, data: dict) -> None:
    """The shard's marker, written last and only if absent (the stale one removed first)."""
    from capaudit.io.markers import write_marker as write

    write(folder, _marker_key(rel), key, data)


def read_json(path: str) -> dict | None:
    """A claim or a manifest (None when absent or unreadable)."""
    try:
        if is_remote(path):
            from capaudit.core.folder import Folder

            raw = Folder(parent_of(path)).read_bytes(name_of(path))
            data = None if raw is None else json.loads(raw.decode("utf-8"))
        else:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
    except (OSError, ValueError, InputError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: str, data: dict) -> None:
    """A claim, manifest or summary, written whole (:func:`capaudit.io.markers.
    atomic_write_bytes`; a local one's parents made)."""
    from capaudit.io.markers import atomic_write_bytes

    if not is_remote(path):
        make_folder(os.path.dirname(path) or ".")
    atomic_write_bytes(path, json.dumps(data, sort_keys=True, default=str, indent=1).encode())


def file_size(path: str) -> int | None:
    if is_remote(path):
        from capaudit.core.folder import Folder

        try:
            return Folder(parent_of(path)).size(name_of(path))
        except InputError:
            return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def is_file(path: str) -> bool:
    if is_remote(path):
        return file_size(path) is not None
    return os.path.isfile(path) and not os.path.islink(path)


def clean_tmp(folder: str, names: list[str]) -> int:
    """Remove what killed writers left of ``names`` (``.NAME.tmp-PID-RANDOM``, the one
    writer's temporary names); returns how many. Object storage has none: an upload not
    committed is never an object."""
    if is_remote(folder):
        return 0
    from capaudit.core.safe_write import temp_prefix

    n = 0
    for name in names:
        head, tail = os.path.split(os.path.join(folder, name))
        for p in glob.glob(os.path.join(glob.escape(head), glob.escape(temp_prefix(tail))
                                        + "*")):
            if os.path.isfile(p) and not os.path.islink(p):
                os.unlink(p)
                n += 1
    return n


# -- the output folder and the work folder ----------------------------------------------
def path_kind(path: str) -> str:
    """``missing``, ``link``, ``dir`` or ``file`` (a link is never followed); on object
    storage ``file`` where an object has that name, else ``missing`` (a prefix is no
    thing: nothing there to be overwritten)."""
    if is_remote(path):
        return "file" if is_file(path) else "missing"
    if os.path.islink(path):
        return "link"
    if os.path.isdir(path):
        return "dir"
    return "file" if os.path.exists(path) else "missing"


def real_path(path: str) -> str:
    return path if is_remote(path) else os.path.realpath(path)


def absolute(path: str) -> str:
    """A URL as given (no trailing ``/``); a path (or a ``file://`` URL's) made absolute."""
    from capaudit.core.urls import local_path

    return path.rstrip("/") if is_remote(path) else os.path.abspath(local_path(path))


def inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or under it (links resolved on a disk)."""
    path, folder = real_path(path), real_path(folder)
    sep = "/" if is_remote(folder) else os.sep
    return path == folder or path.startswith(folder.rstrip(sep) + sep)


def remove_file(path: str) -> None:
    """Remove a file capaudit wrote (never a link's target, never a folder)."""
    if is_remote(path):
        from capaudit.core.folder import Folder

        Folder(parent_of(path)).remove(name_of(path))
    elif is_file(path):
        os.unlink(path)


def remove_empty_dir(path: str) -> None:
    """Remove a folder only if it is empty (object storage has no folders)."""
    if is_remote(path):
        return
    try:
        os.rmdir(path)
    except OSError:
        pass


def make_folder(path: str) -> str:
    """Create a local folder (``mkdir -p``; object storage has none to make)."""
    from capaudit.core.folder import Folder

    Folder(path).make()
    return path


def check_out_folder(path: str) -> None:
    """The one writer's rules for a folder output (not ``/``, the working folder or a
    link; a file of that name refused); a URL must be one capaudit may write."""
    if is_remote(path):
        from capaudit.core.remote_write import check_writable
        from capaudit.core.urls import join

        check_writable(join(path, "x"))
        return
    from capaudit.core.safe_write import check_folder_target

    check_folder_target(path)


def work_folder(store_path: str, name: str) -> str:
    """The default work folder of a run named ``name`` beside the store."""
    from capaudit.io.work_dir import default_work_dir

    return str(default_work_dir(store_path, name, "filter-work"))


@contextmanager
def work_lock(path: str) -> Iterator[str]:
    """The work folder held by this run alone (:func:`capaudit.io.work_dir.work_dir_lock`);
    yields its location (a path, or the URL as given)."""
    from capaudit.io.work_dir import work_dir_lock

    with work_dir_lock(path) as root:
        yield getattr(root, "location", None) or str(root)


def remove_work_folder(made: str, up_to: str | None = None) -> None:
    """What a successful run made in its work folder (:func:`capaudit.io.work_dir.remove_work`)."""
    from capaudit.io.work_dir import remove_work

    remove_work(made, up_to=up_to)
