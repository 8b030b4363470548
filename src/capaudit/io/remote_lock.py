"""The lock of a work folder on object storage: one run at a time without ``flock``.

Why: two runs on one work folder redo (and pay for) each other's shards and remove each
other's markers. On a disk an OS lock dies with its process; object storage has no locks,
so the lock is an object, ``.lock``, created only if absent (a conditional create,
:mod:`capaudit.core.remote_write`), holding who holds it (host, pid, a random token) and a
heartbeat time rewritten every :data:`HEARTBEAT_S` seconds while the run lives. A second
run finds it and stops with one line naming the holder, unless the lock is stale: its
process is gone (same host), or its heartbeat is older than :data:`STALE_S` (a run killed
on another machine). The lock is removed when the run ends, only if it is still ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time
from typing import Iterator

from capaudit.core.folder import Folder
from capaudit.core.remote_write import Exists
from capaudit.errors import InputError

__all__ = ["remote_lock", "LOCK_NAME", "HEARTBEAT_S", "STALE_S"]

LOCK_NAME = ".lock"
HEARTBEAT_S, STALE_S = 60.0, 300.0


def _holder(folder: Folder) -> dict:
    data = folder.read_bytes(LOCK_NAME)
    try:
        held = json.loads(data.decode("utf-8")) if data else {}
    except (ValueError, UnicodeDecodeError):
        held = {}
    return held if isinstance(held, dict) else {}


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OverflowError):
        return True
    return True


def _stale(held: dict) -> bool:
    if held.get("host") == socket.gethostname() and not _alive(held.get("pid")):
        return True
    beat = held.get("beat")
    return not isinstance(beat, (int, float)) or time.time() - beat > STALE_S


def _take(folder: Folder, me: dict) -> None:
    data = json.dumps({**me, "beat": time.time()}).encode()
    try:
        folder.write_bytes(LOCK_NAME, data, exclusive=True)
        return
    except Exists:
        held = _holder(folder)
    if not _stale(held):
        raise InputError(f"another capaudit run (host {held.get('host', '?')}, pid "
                         f"{held.get('pid', '?')}) is using this work folder", path=folder,
                         fix="wait for it to finish, or pass another --work-dir (a lock left "
                             f"by a run killed on another machine expires {STALE_S:g} s "
                             "after its last heartbeat)")
    folder.remove(LOCK_NAME)
    try:
        folder.write_bytes(LOCK_NAME, data, exclusive=True)
    except Exists:
        raise InputError("another capaudit run took this work folder just now", path=folder,
                         fix="wait for it to finish, or pass another --work-dir") from None


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
