"""Local executor: in-process for one worker, a process pool for more.

Why processes, not threads: detectors and local models hold the GIL in
Python glue code; processes scale on CPU. One worker runs in the calling
process, which keeps tests fast and tracebacks plain. The pool uses the
``spawn`` context so workers never inherit a half-initialised torch or an
open DuckDB connection from the parent.

Ctrl-C: the terminal sends SIGINT to every process of the group, workers included, and a
worker interrupted while it imports or waits prints a screenful of ``KeyboardInterrupt``
tracebacks. So workers are started with SIGINT ignored (an ignored signal stays ignored
across ``exec``, before any of their code runs); the parent alone answers Ctrl-C: it stops
its workers at once (what they finished is kept) and the CLI prints one line, exit 130.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import signal
import threading
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterable, Iterator


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int = 1, **_: Any):
        """The workers, once started, serve every :meth:`map_unordered` until :meth:`close`:
        a step's passes over the same shards start them, and import in them, once."""
        self.workers = max(1, int(workers))
        self._pool: ProcessPoolExecutor | None = None

    def map_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        tasks = list(tasks)
        if self.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                yield task, fn(task)
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=min(self.workers, len(tasks)),
                                             mp_context=mp.get_context("spawn"),
                                             initializer=_end_with_parent)
        try:
            with _sigint_ignored():  # the workers start (at submit) ignoring Ctrl-C
                futures = {self._pool.submit(fn, t): t for t in tasks}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield futures[fut], fut.result()
        except BaseException:  # Ctrl-C or a failed task: stop the other workers now
            self.stop()
            self.close()
            raise

    def stop(self) -> None:
        """End the workers at once (SIGTERM): running tasks are abandoned, never half-kept
        (each shard's result is written atomically, and only finished ones count)."""
        if self._pool is None:
            return
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.terminate()
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.join(2)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _end_with_parent() -> None:
    """In each worker (Linux): die with the parent. A parent killed outright (SIGKILL, or
    SIGTERM before its handler runs) otherwise left its workers computing for minutes."""
    import ctypes
    import os
    import sys

    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent died before the line above ran
        os._exit(1)


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while worker processes are spawned (they inherit it); the parent's
    own handler is back before any task result is awaited."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
