"""One writer for every file capaudit writes: exports, reports, pages, JSON, sidecars.

Why one: an output path comes from the user (``--out``), from a set name, or from a
folder someone else can write to, so every write must hold the same promises. A file
is written to a temporary file created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` beside the
target (a name planted there, link or not, is never opened) and renamed into place,
which never follows a link either; a target that is a symbolic link is refused. On
any failure the temporary file is removed and a file-system fault (full disk,
read-only mount, no permission, a missing folder) becomes one line with its fix.
A folder output is built in a fresh temporary folder and renamed into place; an
existing folder with files in it is refused unless ``overwrite``, and then only
capaudit's own files in it (by name, or listed in its manifest) are replaced: nothing
is removed that this run did not create, except files an earlier capaudit export
listed in the folder's manifest.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import IO, Iterator

from capaudit.errors import InputError

__all__ = ["write_text", "write_bytes", "atomic_open", "atomic_path", "folder_output",
           "make_dirs", "protect", "write_error", "check_file_target", "check_folder_target",
           "new_temp_file", "replace_with", "MANIFEST"]

MANIFEST = ".capaudit-files.json"   # the files a folder export wrote, for --overwrite
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


_PROTECTED: dict[str, str] = {}   # resolved path -> what it is, for this process


def protect(path: str | Path, what: str) -> None:
    """Mark ``path`` (and its DuckDB WAL) as never to be written over in this process: the
    store registers itself when it opens, so no ``--out``/``--json``/``--report`` may
    replace it."""
    resolved = Path(path).resolve()
    _PROTECTED[str(resolved)] = what
    _PROTECTED[str(resolved) + ".wal"] = what


def _refuse_protected_path(path: Path) -> None:
    what = _PROTECTED.get(str(path.resolve()))
    if what:
        raise InputError(f"the output is {what}; writing it would destroy it", path=path,
                         fix="choose another output path")


def check_file_target(path: str | Path) -> Path:
    """Refuse a file output that is a symbolic link, a folder or a protected file."""
    path = Path(path)
    if str(path) in ("", ".", "/") or path.name in ("", ".", ".."):
        raise InputError("not a file name", path=path, fix="give a file name, e.g. out.jsonl")
    if _is_link(path):
        raise InputError("the output is a symbolic link; capaudit does not write through "
                         "links", path=path, fix="remove the link, or choose another path")
    if path.is_dir():
        raise write_error(OSError(errno.EISDIR, "is a directory"), path)
    _refuse_protected_path(path)
    return path


def check_folder_target(path: str | Path) -> Path:
    """Refuse a folder output that is ``/``, the working folder or one above it, or a link."""
    path = Path(path)
    if str(path) in ("", ".", "/") or path.name in ("", ".", ".."):
        raise InputError("the output folder is the working folder or the file-system root",
                         path=path, fix="give a new folder, e.g. --out export_dir")
    resolved, cwd = path.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents or resolved == Path.home().resolve():
        raise InputError("the output folder holds the working folder or is the home folder",
                         path=path, fix="give a new folder, e.g. --out export_dir")
    if _is_link(path):
        raise InputError("the output is a symbolic link; capaudit does not write through "
                         "links", path=path, fix="remove the link, or choose another path")
    _refuse_protected_path(path)
    if path.exists() and not path.is_dir():
        raise InputError("the output exists and is a file, not a folder", path=path,
                         fix="choose a new folder name")
    return path


def make_dirs(path: str | Path) -> Path:
    """``mkdir -p`` with file-system faults as one line."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise write_error(OSError(errno.ENOTDIR, str(exc)), path) from None
    except OSError as exc:
        raise write_error(exc, path) from None
    return path


def _new_tmp(directory: Path, name: str) -> tuple[Path, int]:
    """A temporary file of our own in ``directory``: a fresh random name, created
    exclusively and never through a link."""
    while True:
        tmp = directory / f".{name[:120]}.tmp-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            return tmp, os.open(tmp, _FLAGS, 0o666)
        except FileExistsError:
            continue


@contextlib.contextmanager
def _replacing(path: str | Path, parents: bool) -> Iterator[tuple[Path, int]]:
    """Our own temporary file beside ``path`` (its name and open descriptor), renamed onto
    ``path`` when the block ends cleanly and removed when it does not."""
    path = check_file_target(path)
    if parents:
        make_dirs(path.parent)
    try:
        tmp, fd = _new_tmp(path.parent, path.name)
    except OSError as exc:
        raise write_error(exc, path) from None
    try:
        yield tmp, fd
        check_file_target(path)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in _WHY:
            raise write_error(exc, path) from None
        raise


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", *, encoding: str = "utf-8",
                newline: str | None = None, parents: bool = False) -> Iterator[IO]:
    """A file handle whose content replaces ``path`` only when the block ends cleanly."""
    with _replacing(path, parents) as (_, fd):
        with (os.fdopen(fd, "wb") if "b" in mode else
              os.fdopen(fd, "w", encoding=encoding, newline=newline)) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


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
    path = check_file_target(path)
    try:
        tmp, fd = _new_tmp(path.parent, path.name)
    except OSError as exc:
        raise write_error(exc, path) from None
    os.close(fd)
    return tmp


def replace_with(tmp: Path, path: str | Path) -> None:
    """Rename our temporary file ``tmp`` onto ``path`` (never through a link)."""
    try:
        check_file_target(path)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in _WHY:
            raise write_error(exc, path) from None
        raise


def write_text(path: str | Path, text: str, *, encoding: str = "utf-8",
               parents: bool = False) -> Path:
    with atomic_open(path, "w", encoding=encoding, parents=parents) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes, *, parents: bool = False) -> Path:
    with atomic_open(path, "wb", parents=parents) as fh:
        fh.write(data)
    return Path(path)


def _new_dir(parent: Path, name: str) -> Path:
    while True:
        tmp = parent / f".{name[:120]}.tmp-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            os.mkdir(tmp, 0o777)
            return tmp
        except FileExistsError:
            continue


def _listed(folder: Path) -> list[str]:
    """The plain file names an earlier export listed in ``folder``'s manifest."""
    try:
        names = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [n for n in names if isinstance(n, str) and n and "/" not in n and "\\" not in n
            and n not in (".", "..")]


def _merge(staging: Path, out: Path) -> None:
    """Move the staged files into ``out``: same names replaced, stale ones of an earlier
    export (its manifest) removed, every other file left alone."""
    names = sorted(p.name for p in staging.iterdir())
    earlier = _listed(out)
    for n in names:
        if _is_link(out / n) or (out / n).is_dir():
            raise InputError("the output folder has a link or a folder where capaudit writes "
                             "its file", path=out / n, fix="choose a new output folder")
    for n in names:
        os.replace(staging / n, out / n)
    for n in set(earlier) - set(names):
        target = out / n
        if not _is_link(target) and target.is_file():
            target.unlink()


@contextlib.contextmanager
def folder_output(out: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """A fresh temporary folder to build ``out`` in; on success it becomes ``out``."""
    out = check_folder_target(out)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise InputError("the output folder exists and has files in it", path=out,
                         fix="choose a new folder, or pass --overwrite to replace "
                         "capaudit's own files in it")
    make_dirs(out.parent)
    try:
        staging = _new_dir(out.parent, out.name)
    except OSError as exc:
        raise write_error(exc, out) from None
    try:
        yield staging
        names = sorted(p.name for p in staging.iterdir())
        write_text(staging / MANIFEST, json.dumps({"files": names + [MANIFEST]}))
        if out.is_dir():
            _merge(staging, out)
            os.rmdir(staging)
        else:
            os.rename(staging, out)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno in _WHY:
            raise write_error(exc, out) from None
        raise
