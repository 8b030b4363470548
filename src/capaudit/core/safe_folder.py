"""Folder outputs (``sets export --to webdataset|hf``, a trained model): built aside,
moved in, and never a file removed or replaced that capaudit cannot show it wrote.

Why: ``shutil.rmtree`` of an output folder once deleted a user's folder with everything
in it, and a manifest anyone could write (``{"files": ["live.duckdb"]}``) once had
``--overwrite`` delete the store in use. A folder output is built in a fresh temporary
folder beside the target and renamed into place when the target is new or empty; an
existing folder with files in it is refused unless ``overwrite``. The folder's manifest
(``.capaudit-files.json``) records the size and sha256 of every file capaudit wrote there,
and with ``overwrite`` a file in the folder is replaced or removed only when it is still,
byte for byte, the file the manifest describes, and is not the store in use or a
registered source (:func:`capaudit.core.safe_write.protected_as`). Every other file stays;
a file of a name capaudit is about to write that it cannot vouch for stops the export
before anything is moved.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Iterator

from capaudit.core.safe_write import (check_folder_target, make_dirs, protected_as,
                                      temp_prefix, write_error, write_text)
from capaudit.errors import InputError

__all__ = ["folder_output", "MANIFEST", "file_record", "verified_names", "still_ours"]

MANIFEST = ".capaudit-files.json"   # the files a folder export wrote, for --overwrite
MANIFEST_VERSION = 2                 # 1: a bare list of names (nothing verifiable)


def _new_dir(parent: Path, name: str) -> Path:
    while True:
        tmp = parent / f"{temp_prefix(name)}{os.getpid()}-{secrets.token_hex(6)}"
        try:
            os.mkdir(tmp, 0o777)
            return tmp
        except FileExistsError:
            continue


def file_record(path: Path) -> dict:
    """``{"size", "sha256"}`` of a plain file (read once, in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return {"size": os.path.getsize(path), "sha256": digest.hexdigest()}


def _plain_name(name) -> bool:
    """A name of a file directly in the folder (never a path, never the folder itself)."""
    return isinstance(name, str) and bool(name) and "/" not in name and "\\" not in name \
        and "\x00" not in name and name not in (".", "..")


def verified_names(folder: Path) -> dict[str, dict]:
    """The files ``folder``'s manifest says capaudit wrote, with their size and sha256 (none
    when there is no manifest). A manifest capaudit cannot have written (no checksums: an
    older capaudit's, or one written by hand; a path or the store in use among its names)
    is one line: ``--overwrite`` then trusts nothing in the folder."""
    path = folder / MANIFEST
    if not os.path.lexists(path):
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files = data.get("files") if isinstance(data, dict) else None
    except (OSError, ValueError, UnicodeDecodeError):
        files = None
    ok = isinstance(files, dict) and all(
        _plain_name(n) and isinstance(r, dict) and isinstance(r.get("size"), int)
        and isinstance(r.get("sha256"), str) for n, r in files.items())
    listed = [n for n in (files or ()) if _plain_name(n) and protected_as(folder / n)]
    if not ok or listed or os.path.islink(path):
        why = (f"it lists {protected_as(folder / listed[0])} ({listed[0]})" if listed else
               "it records no checksums (an older capaudit's, or not capaudit's)")
        raise InputError(f"the output folder's manifest cannot be trusted: {why}; nothing "
                         "was replaced", path=path,
                         fix=f"remove {MANIFEST} and the files you no longer want by hand, "
                         "or choose a new output folder")
    return files


def still_ours(path: Path, record: dict | None) -> bool:
    """``path`` is a plain file (no link), not protected, and still has the size and sha256
    capaudit recorded when it wrote it."""
    if not record:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != record["size"] or protected_as(path):
        return False
    return file_record(path)["sha256"] == record["sha256"]


def _plan_merge(staging: Path, out: Path) -> tuple[list[str], list[str]]:
    """(names to move in, earlier files of ours to remove); one line, before anything
    moves, when a name capaudit writes is taken by a file it cannot vouch for."""
    names = sorted(p.name for p in staging.iterdir())
    earlier = verified_names(out)
    for n in names:
        target = out / n
        if not os.path.lexists(target):
            continue
        what = protected_as(target)
        if what:
            raise InputError(f"the output folder holds {what} where capaudit writes its "
                             "file; nothing was replaced", path=target,
                             fix="choose a new output folder")
        if os.path.islink(target) or target.is_dir():
            raise InputError("the output folder has a link or a folder where capaudit writes "
                             "its file; nothing was replaced", path=target,
                             fix="choose a new output folder")
        if n != MANIFEST and not still_ours(target, earlier.get(n)):
            raise InputError("a file capaudit is about to write is already in the output "
                             "folder, and it is not the one capaudit wrote there (changed "
                             "since, or never listed with its checksum); nothing was "
                             "replaced", path=target,
                             fix="move that file away, or choose a new output folder")
    stale = [n for n in sorted(set(earlier) - set(names)) if still_ours(out / n, earlier[n])]
    return names, stale


def _merge(staging: Path, out: Path) -> None:
    """Move the staged files into ``out``: same names replaced, stale files of an earlier
    export removed when they are still what it wrote, every other file left alone."""
    names, stale = _plan_merge(staging, out)
    for n in names:
        os.replace(staging / n, out / n)
    for n in stale:
        (out / n).unlink()


def _write_manifest(staging: Path) -> None:
    files = {p.name: file_record(p) for p in sorted(staging.iterdir()) if p.is_file()}
    write_text(staging / MANIFEST, json.dumps({"version": MANIFEST_VERSION, "files": files},
                                              indent=1, sort_keys=True))


@contextlib.contextmanager
def folder_output(out: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """A fresh temporary folder to build ``out`` in; on success it becomes ``out``."""
    out = check_folder_target(out)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise InputError("the output folder exists and has files in it", path=out,
                         fix="choose a new folder, or pass --overwrite to replace "
                         "capaudit's own files in it")
    if overwrite and out.is_dir():
        verified_names(out)   # a manifest that cannot be trusted: refused before any work
    make_dirs(out.parent)
    try:
        staging = _new_dir(out.parent, out.name)
    except OSError as exc:
        raise write_error(exc, out) from None
    try:
        yield staging
        _write_manifest(staging)
        if out.is_dir():
            _merge(staging, out)
            os.rmdir(staging)
        else:
            os.rename(staging, out)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise write_error(exc, out) from None
        raise
