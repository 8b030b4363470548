"""Folder outputs (``sets export --to webdataset|hf``, a trained model): built aside,
moved in, and never a folder removed.

Why: ``shutil.rmtree`` of an output folder once deleted a user's folder with everything
in it. A folder output is now built in a fresh temporary folder beside the target and
renamed into place when the target is new or empty; an existing folder with files in it
is refused unless ``overwrite``, and then the new files replace those of the same name,
files an earlier capaudit export listed in the folder's manifest (``.capaudit-files.json``)
and did not write again are removed, and every other file stays.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterator

from capaudit.core.safe_write import check_folder_target, make_dirs, write_error, write_text
from capaudit.errors import InputError

__all__ = ["folder_output", "MANIFEST"]

MANIFEST = ".capaudit-files.json"   # the files a folder export wrote, for --overwrite


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
        if os.path.islink(out / n) or (out / n).is_dir():
            raise InputError("the output folder has a link or a folder where capaudit writes "
                             "its file", path=out / n, fix="choose a new output folder")
    for n in names:
        os.replace(staging / n, out / n)
    for n in set(earlier) - set(names):
        target = out / n
        if not os.path.islink(target) and target.is_file():
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
        if isinstance(exc, OSError):
            raise write_error(exc, out) from None
        raise
