"""One writer for every file capaudit writes: exports, reports, pages, JSON, sidecars.

Why one: an output path comes from the user, from a set name, or from a folder others
can write to, so every write keeps the same promises. A file is written to a temporary
file created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` beside the target and renamed into place
(a name planted there is never opened, a rename never follows a link); a target that is a
link, the store or a registered source is refused; on failure the temporary file is
removed and the fault (full disk, read-only, no permission, no folder) is one line. A
folder output is built in a fresh temporary folder and renamed into place; an existing
folder with files in it is refused unless ``overwrite``, which replaces only capaudit's
own files (listed in its manifest; :mod:`capaudit.core.safe_folder`). Nothing is
removed that capaudit did not write.

A URL output (``--json s3://bucket/audit.json``) is an object written whole or not at all:
an upload committed when the block ends cleanly and discarded otherwise
(:mod:`capaudit.core.storage.remote_write`); http(s) and ``hf://`` are refused as outputs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Iterator, NoReturn

from capaudit.core.protected import protect, protected_as   # re-exported: one writer's API
from capaudit.errors import InputError

__all__ = ["write_text", "write_bytes", "atomic_open", "atomic_path", "make_dirs", "protect",
           "protected_as",
           "write_error", "check_file_target", "check_folder_target", "new_temp_file",
           "replace_with", "is_stream", "temp_prefix"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0)

_WHY = {
    errno.ENOSPC: ("the disk is full", "free some space, or write to another disk"),
    errno.EDQUOT: ("the disk quota is used up", "free some space, or write to another disk"),
    errno.EROFS: ("the file system is read-only", "write to a folder on a writable disk"),
    errno.EACCES: ("permission denied", "write to a folder you may write to"),
    errno.EPERM: ("permission denied", "write to a folder you may write to"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "choose another output path"),
    errno.EISDIR: ("it is a folder", "give a file name, e.g. FOLDER/NAME.jsonl"),
    errno.ENOENT: ("its folder does not exist", "create the folder first, or choose "
                   "another output path"),
    errno.ELOOP: ("it is a symbolic link", "remove the link, or choose another output path"),
    errno.ENAMETOOLONG: ("the file name is too long", "choose a shorter output name"),
    errno.EPIPE: ("the program reading the pipe stopped reading", "keep the reader running "
                  "until capaudit ends, or write to a file"),
    errno.ENOTEMPTY: ("a folder of that name has files in it", "choose another output path"),
}


def write_error(exc: OSError, path: str | Path) -> InputError:
    """A file-system fault while writing ``path`` as one line with its fix."""
    why, fix = _WHY.get(exc.errno, (exc.strerror or str(exc), "check the path and the disk"))
    return InputError(f"cannot write here: {why}", path=path, fix=fix)


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _refuse_protected_path(path: Path) -> None:
    what = protected_as(path)
    if what:
        raise InputError(f"the output is {what}; writing it would destroy it", path=path,
                         fix="choose another output path")


def _remote(path) -> bool:
    from capaudit.core.storage.urls import on_disk

    return not on_disk(path)


def check_file_target(path: str | Path) -> Path:
    """Refuse a file output that is a symbolic link, a folder or a protected file (a URL:
    one capaudit may write, returned as it is)."""
    if _remote(path):
        from capaudit.core.storage.remote_write import check_writable

        return check_writable(str(path))
    from capaudit.core.storage.urls import local_path

    path = local_path(path)
    if is_stream(path):
        return path
    if str(path) in ("", ".", "/") or path.name in ("", ".", ".."):
        raise InputError("not a file name", path=path, fix="give a file name, e.g. out.jsonl")
    if _is_link(path):
        raise InputError("the output is a symbolic link; capaudit does not write through "
                         "links", path=path, fix="remove the link, or choose another path")
    try:
        if path.is_dir():
            raise OSError(errno.EISDIR, "is a directory")
        _refuse_protected_path(path)
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise write_error(exc, path) from None
    return path


def check_folder_target(path: str | Path) -> Path:
    """Refuse a folder output that is ``/``, the working folder or one above it, or a link."""
    path = Path(path)
    if str(path) in ("", ".", "/") or path.name in ("", ".", ".."):
        raise InputError("the output folder is the working folder or the file-system root",
                         path=path, fix="give a new folder name, e.g. export_dir")
    resolved, cwd = path.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents or resolved == Path.home().resolve():
        raise InputError("the output folder holds the working folder or is the home folder",
                         path=path, fix="give a new folder name, e.g. export_dir")
    if _is_link(path):
        raise InputError("the output is a symbolic link; capaudit does not write through "
                         "links", path=path, fix="remove the link, or choose another path")
    _refuse_protected_path(path)
    if path.exists() and not path.is_dir():
        raise InputError("the output exists and is a file, not a folder", path=path,
                         fix="choose a new folder name")
    return path


def make_dirs(path: str | Path) -> Path:
    """``mkdir -p`` with file-system faults as one line (object storage has no folders)."""
    if _remote(path):
        return path
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise write_error(OSError(errno.ENOTDIR, str(exc)), path) from None
    except OSError as exc:
        raise write_error(exc, path) from None
    return path


def temp_prefix(name: str) -> str:
    """``.NAME.tmp-``, the start of every temporary name the one writer gives an output called
    ``name`` (then ``PID-RANDOM``). NAME is cut to 120 *bytes* at a whole character: a file
    name may hold 255 bytes, and a cut of 120 characters let a name of four-byte characters
    make a temporary name too long to create."""
    return "." + os.fsencode(name)[:120].decode("utf-8", "ignore") + ".tmp-"


def _new_tmp(directory: Path, name: str) -> tuple[Path, int]:
    """A temporary file of our own in ``directory``: a fresh random name, created
    exclusively and never through a link."""
    while True:
        tmp = directory / f"{temp_prefix(name)}{os.getpid()}-{secrets.token_hex(6)}"
        try:
            return tmp, os.open(tmp, _FLAGS, 0o666)
        except FileExistsError:
            continue


def _temp_beside(path: Path) -> tuple[Path, int]:
    """A new temporary file of ours in ``path``'s folder (name and open descriptor); a
    file-system fault is one line naming ``path``."""
    try:
        return _new_tmp(path.parent, path.name)
    except OSError as exc:
        raise write_error(exc, path) from None


@contextlib.contextmanager
def _replacing(path: str | Path, parents: bool) -> Iterator[tuple[Path, int]]:
    """Our own temporary file beside ``path`` (its name and open descriptor), renamed onto
    ``path`` when the block ends cleanly and removed when it does not."""
    path = check_file_target(path)
    if parents:
        make_dirs(path.parent)
    tmp, fd = _temp_beside(path)
    try:
        yield tmp, fd
    except BaseException as exc:
        _discard(tmp, path, exc)
    replace_with(tmp, path)


def is_stream(path: str | Path) -> bool:
    """``path`` is (or links to) a character device or a pipe (``/dev/null``, a FIFO):
    written into directly, never replaced by a file (as root, a rename onto ``/dev/null``
    would succeed and break the machine), and no provenance file beside it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", *, encoding: str = "utf-8",
                newline: str | None = None, parents: bool = False) -> Iterator[IO]:
    """A file handle whose content replaces ``path`` only when the block ends cleanly."""
    opened = (lambda fd: os.fdopen(fd, "wb") if "b" in mode else
              os.fdopen(fd, "w", encoding=encoding, newline=newline))
    if _remote(path):
        with _remote_open(str(path), mode, encoding, newline) as fh:
            yield fh
        return
    if is_stream(path):   # /dev/null, /dev/stdout on a pipe or terminal, a FIFO
        try:
            with opened(os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))) as fh:
                yield fh
        except OSError as exc:  # /dev/full, a pipe whose reader left: one line
            if exc.errno in _WHY:
                raise write_error(exc, path) from None
            raise
        return
    with _replacing(path, parents) as (_, fd):
        with opened(fd) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


@contextlib.contextmanager
def _remote_open(url: str, mode: str, encoding: str, newline: str | None) -> Iterator[IO]:
    """An upload committed when the block ends cleanly (text through a wrapper that is
    flushed, never closed, before the commit)."""
    import io

    from capaudit.core.storage.remote_write import open_output

    with open_output(url) as raw:
        if "b" in mode:
            yield raw
            return
        text = io.TextIOWrapper(raw, encoding=encoding, newline=newline, write_through=True)
        try:
            yield text
            text.flush()
        finally:
            text.detach()


@contextlib.contextmanager
def atomic_path(path: str | Path, *, parents: bool = False) -> Iterator[Path]:
    """The name of our own empty temporary file, for a writer that takes a path (DuckDB's
    COPY); it replaces ``path`` when the block ends cleanly."""
    with _replacing(path, parents) as (tmp, fd):
        os.close(fd)
        yield tmp


def new_temp_file(path: str | Path) -> Path:
    """An empty temporary file of our own beside ``path`` for a writer that streams over
    several calls (a parquet writer); :func:`replace_with` renames it into place."""
    tmp, fd = _temp_beside(check_file_target(path))
    os.close(fd)
    return tmp


def replace_with(tmp: Path, path: str | Path) -> None:
    """Rename our temporary file ``tmp`` onto ``path`` (never through a link)."""
    try:
        check_file_target(path)
        os.replace(tmp, path)
    except BaseException as exc:
        _discard(tmp, path, exc)


def _discard(tmp: Path, path: str | Path, exc: BaseException) -> NoReturn:
    """Remove our temporary file after ``exc``, then raise it (a file-system fault as one
    line naming ``path``)."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    if isinstance(exc, OSError) and exc.errno in _WHY:
        raise write_error(exc, path) from None
    raise exc


def write_text(path: str | Path, text: str, *, encoding: str = "utf-8",
               parents: bool = False) -> Path:
    with atomic_open(path, "w", encoding=encoding, parents=parents) as fh:
        fh.write(text)
    return path if _remote(path) else Path(path)


def write_bytes(path: str | Path, data: bytes, *, parents: bool = False) -> Path:
    with atomic_open(path, "wb", parents=parents) as fh:
        fh.write(data)
    return path if _remote(path) else Path(path)
