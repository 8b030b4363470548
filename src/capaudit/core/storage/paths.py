"""Files named by location strings (a local path or a URL): open, list, stat, write whole,
remove; the one place that asks whether a location is on a disk or in object storage.

Why by strings: a Ray task receives strings, never a file system with its credentials; the
readers, the sharded filter and the exports call these functions, which keep on either store:

- an output appears whole or not at all (a temporary name renamed on a disk, never through
  a link; an upload committed only when complete, :mod:`~capaudit.core.storage.remote_write`);
- a read is streamed (a remote one in retried blocks, :func:`~capaudit.core.storage.fs.
  open_input`); a reader that needs a path gets a private local copy (:func:`as_local`);
- an input's identity: a disk file's sha256, an object's what its store reports.

fsspec is imported only when a location is a URL.
"""

from __future__ import annotations

import glob
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from capaudit.core.storage.urls import (is_remote, join, local_path, name_of, on_disk,
                                        parent_of, shown_url)
from capaudit.errors import InputError, StoreFault

__all__ = ["store_identifies", "write_whole", "as_local", "kept_local", "open_binary", "stat_of",
           "local_head", "atomic_output", "read_json", "file_size", "is_file", "clean_tmp",
           "path_kind", "real_path", "absolute", "inside", "remove_file", "remove_empty_dir",
           "make_folder", "check_out_folder", "read_whole"]


def store_identifies(location) -> bool:
    """The store reports ``location``'s identity (ETag, size, modification time: an object);
    a disk file is known by its content instead, its sha256 hashed while it is read."""
    return is_remote(location)


@contextmanager
def as_local(location) -> Iterator[tuple[Path, str | None]]:
    """``(a local path holding location, its URL as shown)``: a local path as it is (no URL:
    None); a remote file (or folder) as a private temporary copy of the same name, removed
    after the block (:mod:`~capaudit.core.storage.local_copy`); a capaudit error raised in
    the block names the URL, never the copy (same class, row and fix)."""
    if on_disk(location):
        yield local_path(location), None   # a file:// URL: the file it names
        return
    from capaudit.core.storage.local_copy import local_copy, naming_url

    with local_copy(str(location)) as local, naming_url(local, shown_url(location)):
        yield local, shown_url(location)


def kept_local(location) -> tuple[Path | None, str | None]:
    """:func:`as_local` for a file read more than once (``audit run``'s captions): ``(None,
    None)`` for a local path; for a URL a copy kept until the process ends, the URL shown."""
    if on_disk(location):
        return None, None
    from capaudit.core.storage.local_copy import kept_copy

    return kept_copy(location), shown_url(location)


def write_whole(path, data: bytes) -> None:
    """Write ``data`` whole or not at all: a local path through a fresh ``.NAME.tmp-PID-RANDOM``
    (never through a link), fsync and rename; a URL as an upload committed when complete."""
    if is_remote(path):
        from capaudit.core.storage.remote_write import write_object

        write_object(str(path), data)
        return
    from capaudit.core.safe_write import write_bytes

    write_bytes(local_path(path), data)


def open_binary(path: str) -> IO[bytes]:
    """``path`` opened for reading in binary (a remote one in retried blocks); a local
    file's fault is the ``OSError`` of ``open``."""
    if is_remote(path):
        from capaudit.core.storage.fs import open_input

        return open_input(path)
    return open(local_path(path), "rb")   # a path, or a file:// URL


def read_whole(location, what: str, fix: str) -> bytes:
    """A small input's bytes (a path or a URL), or one line."""
    try:
        with open_binary(str(location)) as fh:
            return fh.read()
    except OSError:   # a local path that is not a readable file (a URL's: one line already)
        raise InputError(f"{what} not found", path=shown_url(str(location)), fix=fix) from None


@contextmanager
def readable(location, storage_options: dict | None = None, *,
             ranged: bool = False) -> Iterator[tuple]:
    """``(name for messages, source)`` of a file a layout reader reads: a local file as its
    ``Path`` (the reader opens it, memory-maps it or seeks in it), a remote one as its URL
    text when the reader fetches byte ranges itself (``ranged``: parquet), else open as a
    stream of retried blocks; a URL is named as :func:`~capaudit.core.storage.urls.shown_url`
    shows it."""
    local = local_path(location)
    if local is not None:
        yield local, local
        return
    if ranged:
        yield shown_url(location), str(location)
        return
    from capaudit.core.storage.fs import open_input

    with open_input(str(location), storage_options) as src:
        yield shown_url(location), src


def stat_of(path: str) -> dict:
    """A disk file's stat, or an object's identity read fresh (no cached listing)."""
    if is_remote(path):
        from capaudit.core.storage.fs import filesystem, identity

        fs, key = filesystem(path)
        fs.invalidate_cache(key)
        return identity(path)
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino}


@contextmanager
def local_head(path: str, n: int = 1 << 16) -> Iterator[str]:
    """A local path to sniff a file's format on: the file itself, or a private temporary
    file of a URL's name holding its first ``n`` bytes (one ranged read)."""
    if not is_remote(path):
        yield path
        return
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="capaudit-head-")
    try:
        local = os.path.join(folder, name_of(path))
        with open_binary(path) as src, open(local, "wb") as dst:
            dst.write(src.read(n))
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- outputs ----------------------------------------------------------------------------
@contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """A binary handle whose content becomes ``path`` only when the block ends cleanly: on
    a disk a temporary name beside it, renamed (parents made, never through a link); on
    object storage an upload committed then, discarded otherwise."""
    if is_remote(path):
        from capaudit.core.storage.remote_write import open_output

        with open_output(path) as fh:
            yield fh
        return
    from capaudit.core.safe_write import atomic_open

    with atomic_open(path, "wb", parents=True) as fh:
        yield fh


def read_json(path: str) -> dict | None:
    """A JSON object file (None when absent, unreadable or not an object)."""
    try:
        if is_remote(path):
            from capaudit.core.storage.folder import Folder

            raw = Folder(parent_of(path)).read_bytes(name_of(path))
            data = None if raw is None else json.loads(raw.decode("utf-8"))
        else:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
    except (OSError, ValueError, InputError):
        return None
    return data if isinstance(data, dict) else None


def file_size(path: str) -> int | None:
    """Bytes, or None where absent (a status-less S3 403 too: a key's without ListBucket)."""
    if is_remote(path):
        from capaudit.core.storage.folder import Folder

        try:
            return Folder(parent_of(path)).size(name_of(path))
        except InputError as exc:   # a refusal or no answer is not absence, but S3's 403
            if isinstance(exc, StoreFault) and getattr(exc, "status", 0) is not None:
                raise
            return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def is_file(path: str) -> bool:
    """A file (not a link) at a path, a ``file://`` URL, or an object at a URL."""
    if is_remote(path):
        return file_size(path) is not None
    local = local_path(path)
    return os.path.isfile(local) and not os.path.islink(local)


def clean_tmp(folder: str, names: list[str]) -> int:
    """Remove (and count) what killed writers left of ``names`` (``.NAME.tmp-PID-RANDOM``);
    object storage has none: an upload not committed is never an object."""
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
    return path.rstrip("/") if is_remote(path) else os.path.abspath(local_path(path))


def inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or under it (links resolved on a disk)."""
    path, folder = real_path(path), real_path(folder)
    sep = "/" if is_remote(folder) else os.sep
    return path == folder or path.startswith(folder.rstrip(sep) + sep)


def remove_file(path: str) -> None:
    """Remove a file capaudit wrote (never a link's target, never a folder)."""
    if is_remote(path):
        from capaudit.core.storage.folder import Folder

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
    from capaudit.core.storage.folder import Folder

    Folder(path).make()
    return path


def check_out_folder(path: str) -> None:
    """The one writer's rules for a folder output (not ``/``, the working folder, a link or
    a file); a URL must be one capaudit may write."""
    if is_remote(path):
        from capaudit.core.storage.remote_write import check_writable

        check_writable(join(path, "x"))
        return
    from capaudit.core.safe_write import check_folder_target

    check_folder_target(path)
