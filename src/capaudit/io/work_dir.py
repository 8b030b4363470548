"""Work folders of the resumable commands: where they go, one run at a time, and removal.

Why in ``io`` beside the shard markers: ``enrich``, ``annotations detect`` and
``audit run --shards`` all keep temporary files and completion markers in a work
folder; two runs in one folder would redo (and pay for) each other's work and
delete each other's temporary files.

Where (:func:`default_work_dir`): beside the store, in ``<store>.work/`` (for
``capaudit.duckdb``: ``capaudit.duckdb.work/NAME.audit-work``), never in the working
directory, where a sharded audit used to leave ``NAME.audit-work/`` wherever it was run.
Removal (:func:`remove_work`): after a successful run, only what the run made.

A work folder may be a URL (``--work-dir s3://bucket/run``: the one a Ray cluster without a
shared disk needs). One run at a time: :func:`capaudit.core.storage.lock.work_dir_lock`
(``flock`` on a disk; on object storage an object created only if absent, refreshed while the
run lives).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from capaudit.core.storage.lock import LOCK_NAME

__all__ = ["default_work_dir", "remove_work"]


def default_work_dir(store_path: str | Path, name: str, suffix: str) -> Path:
    """``<store>.work/NAME.SUFFIX``: the work folder of a run on the store at ``store_path``
    when no ``--work-dir`` is given (a store in memory: the user cache dir)."""
    if str(store_path) in ("", ":memory:"):
        from capaudit.core.config import user_cache_dir

        return user_cache_dir() / "work" / f"{name}.{suffix}"
    return Path(f"{store_path}.work") / f"{name}.{suffix}"


def remove_work(made: str | Path, *, up_to: str | Path | None = None) -> None:
    """Remove what a successful run made: its folder ``made`` (one configuration's markers
    and states, named by its hash), the lock beside it, then the folders above it up to
    ``up_to`` (None: none of them) while they are empty. Anything else in them (another
    configuration's folder, a user's file) stays, and so does the folder holding it; a link
    is never followed."""
    from capaudit.core.storage.urls import local_path

    if local_path(made) is None:   # a URL: this configuration's objects, then nothing above
        from capaudit.core.storage.folder import Folder

        Folder(str(made)).remove_tree()
        return
    made = local_path(made)
    if made.is_symlink() or not made.is_dir():
        return
    shutil.rmtree(made)
    lock = made.parent / LOCK_NAME
    if lock.is_file() and not lock.is_symlink():
        lock.unlink()
    if up_to is None:
        return
    stop, folder = Path(up_to).resolve(), made.parent.resolve()
    while folder == stop or stop in folder.parents:
        try:
            folder.rmdir()      # only an empty folder: never one holding something else
        except OSError:
            return
        folder = folder.parent
