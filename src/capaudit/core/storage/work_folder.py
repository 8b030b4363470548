"""Work folders of the resumable commands: where they go, one run at a time, and removal.

Why: ``enrich``, ``annotations detect``, ``audit run --shards`` and ``filter run --shards``
keep temporary files and completion markers in a work folder, a path or a URL (``--work-dir
s3://bucket/run``: the one a Ray cluster without a shared disk needs).

Where (:func:`default_work_dir`): beside the store, in ``<store>.work/`` (for
``capaudit.duckdb``: ``capaudit.duckdb.work/NAME.audit-work``), never in the working
directory, where a sharded audit used to leave ``NAME.audit-work/`` wherever it was run.
Removal (:func:`remove_work`): after a successful run, only what the run made.

One run at a time: two runs on one work folder redo (and pay for) each other's shards and
remove each other's markers. On a disk (:func:`work_dir_lock`) an OS lock (``flock``) on
``.lock`` dies with its process, so a killed run never leaves a stale lock behind. Object
storage has no locks, so there the lock is an object, ``.lock``, created only if absent (a
conditional create, :mod:`capaudit.core.storage.remote_write`), holding who holds it (host,
pid, a random token) and a heartbeat time rewritten every :data:`HEARTBEAT_S` seconds while the run lives. A second
run finds it and stops with one line naming the holder, unless the lock is stale: its
process is gone (same host), or its heartbeat is older than :data:`STALE_S` (a run killed
on another machine). The lock is removed when the run ends, only if it is still ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock
    fcntl = None

from capaudit.core.runs import process_alive
from capaudit.core.storage.folder import Folder
from capaudit.core.storage.remote_write import Exists
from capaudit.core.storage.urls import local_path
from capaudit.errors import InputError

__all__ = ["default_work_dir", "work_dir_lock", "remote_lock", "remove_work", "LOCK_NAME",
           "HEARTBEAT_S", "STALE_S"]

LOCK_NAME = ".lock"
_LOCKS: dict[Path, int] = {}          # work directories this process holds (re-entrant)
HEARTBEAT_S, STALE_S = 60.0, 300.0


def _holder(folder: Folder) -> dict:
    return _parsed(folder.read_bytes(LOCK_NAME))


def _parsed(data: bytes | None) -> dict:
    """Who holds a remote lock, from its bytes ({}: none, or not capaudit's)."""
    try:
        held = json.loads(data.decode("utf-8")) if data else {}
    except (ValueError, UnicodeDecodeError):
        held = {}
    return held if isinstance(held, dict) else {}


def _stale(held: dict) -> bool:
    if held.get("host") == socket.gethostname() and not process_alive(held.get("pid")):
        return True
    beat = held.get("beat")
    return not isinstance(beat, (int, float)) or time.time() - beat > STALE_S


def _take(folder: Folder, me: dict) -> None:
    data = json.dumps({**me, "beat": time.time()}).encode()
    try:
        folder.write_bytes(LOCK_NAME, data, exclusive=True)
        return
    except Exists:
        raw = folder.read_bytes(LOCK_NAME)
    if raw is not None:   # None: its run removed it since; nothing to judge, take it below
        held = _parsed(raw)
        if "token" not in held:   # not a lock capaudit wrote: the user's file, never removed
            raise _foreign(folder)
        if not _stale(held):
            raise InputError(f"another capaudit run (host {held.get('host', '?')}, pid "
                             f"{held.get('pid', '?')}) is using this work folder", path=folder,
                             fix="wait for it to finish, or pass another --work-dir (a lock "
                                 f"left by a run killed on another machine expires "
                                 f"{STALE_S:g} s after its last heartbeat)")
        folder.remove(LOCK_NAME)
    try:
        folder.write_bytes(LOCK_NAME, data, exclusive=True)
    except Exists:
        raise InputError("another capaudit run took this work folder just now", path=folder,
                         fix="wait for it to finish, or pass another --work-dir") from None


def _foreign(where) -> InputError:
    return InputError(f"this work folder holds a file {LOCK_NAME} that capaudit did not write "
                      "(capaudit keeps its lock there)", path=where,
                      fix=f"move {LOCK_NAME} elsewhere, or pass another --work-dir")


@contextlib.contextmanager
def remote_lock(location: str) -> Iterator[Folder]:
    """Hold the work folder ``location`` (a URL) for the block; yields its :class:`Folder`."""
    folder = Folder(location)
    me = {"host": socket.gethostname(), "pid": os.getpid(), "token": secrets.token_hex(8)}
    _take(folder, me)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            with contextlib.suppress(Exception):
                if _holder(folder).get("token") == me["token"]:
                    folder.write_bytes(LOCK_NAME, json.dumps({**me, "beat": time.time()})
                                       .encode())
    thread = threading.Thread(target=beat, name="capaudit-lock", daemon=True)
    thread.start()
    try:
        yield folder
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            if _holder(folder).get("token") == me["token"]:
                folder.remove(LOCK_NAME)


@contextlib.contextmanager
def work_dir_lock(work: str | Path) -> Iterator[Path]:
    """Hold the work directory alone: a second run on it stops with one line.

    Two runs on one directory would both send every request (and pay twice)
    and delete each other's temporary files. An OS lock (``flock``) dies with
    its process, so a killed run never leaves a stale lock behind.
    """
    if local_path(work) is None:
        with remote_lock(str(work)) as folder:
            yield folder
        return
    work = local_path(work).resolve()
    if work in _LOCKS or fcntl is None:
        _LOCKS[work] = _LOCKS.get(work, 0) + 1
        try:
            yield work
        finally:
            _LOCKS[work] -= 1
            if not _LOCKS[work]:
                del _LOCKS[work]
        return
    try:
        work.mkdir(parents=True, exist_ok=True)
        # never through a link planted at the lock's name (O_NOFOLLOW)
        fd = os.open(work / LOCK_NAME, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
        fh = os.fdopen(fd, "r+", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot use this work directory ({exc.strerror or exc})", path=work,
                         fix="pass a writable folder with --work-dir") from None
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            raise InputError(f"another capaudit run (pid {holder}) is using this work "
                             "directory", path=work,
                             fix="wait for it to finish, or pass another --work-dir") from None
        held = os.pread(fh.fileno(), 64, 0).strip()
        if held and not held.isdigit():   # neither empty nor a pid: the user's .lock,
            raise _foreign(work)          # neither overwritten nor removed
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        _LOCKS[work] = 1
        try:
            yield work
        finally:
            del _LOCKS[work]
    finally:
        fh.close()  # releases the flock


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
    if local_path(made) is None:   # a URL: this configuration's objects, then nothing above
        Folder(str(made)).remove_tree()
        return
    made = local_path(made)
    if made.is_symlink():
        return
    if made.is_dir():   # a run whose every task failed a unit wrote none: the lock still goes
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
