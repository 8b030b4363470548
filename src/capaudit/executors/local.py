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

Start-up and exit are on every run's critical path: :meth:`LocalExecutor.warm` starts the
workers early, each running a warm-up (the lazy loads its first task would pay: imports, a
model) while the caller still plans; and a worker's exit skips the interpreter's tear-down
(:func:`_exit_at_once`: one that had loaded a parser took 0.25-0.45 s to free it, which the
caller's ``close`` waited for).
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
        self._given = False   # a task was handed to the pool (not only warm-ups)

    def warm(self, fn: Callable[[Any], Any], arg: Any) -> None:
        """Start the workers now, each calling ``fn(arg)`` (a module-level function) before
        its first task. A warm-up only does early what the tasks would do on their own, so
        its failure is ignored there: the task meets the same error where it always did."""
        if self.workers == 1 or self._pool is not None:
            return
        self._pool = self._new_pool(self.workers, (fn, arg))
        with _sigint_ignored():
            for _ in range(self.workers):   # each submit starts a worker (all at once < 3.11)
                self._pool.submit(_started)

    def _new_pool(self, workers: int, warm_up: tuple | None) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                   initializer=_start_worker, initargs=(warm_up,))

    def map_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        tasks = list(tasks)
        if self.workers == 1 or (len(tasks) <= 1 and self._pool is None):  # none warmed
            for task in tasks:
                yield task, fn(task)
            return
        if self._pool is None:
            self._pool = self._new_pool(min(self.workers, len(tasks)), None)
        try:
            with _sigint_ignored():  # the workers start (at submit) ignoring Ctrl-C
                futures = {self._pool.submit(fn, t): t for t in tasks}
            self._given = True
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
        """The workers finish what runs and exit; workers given no task (warmed up for a
        plan that failed or left nothing to do) are ended at once (:meth:`stop`)."""
        if self._pool is not None:
            if self._given:
                self._pool.shutdown(wait=True, cancel_futures=True)
            else:
                self.stop()
            self._pool, self._given = None, False


def _start_worker(warm_up: tuple | None) -> None:
    """Each worker's start: it dies with its parent and exits at once (:func:`_exit_at_once`),
    then runs the warm-up, if any (see :meth:`LocalExecutor.warm`)."""
    import threading

    _end_with_parent()
    register_late = getattr(threading, "_register_atexit", None)   # CPython 3.9+, private
    if register_late is not None:   # without it, the interpreter's own (slower) exit
        register_late(_exit_last)   # runs once the worker's tasks are over
    if warm_up is not None:
        fn, arg = warm_up
        with contextlib.suppress(Exception):
            fn(arg)


def _started() -> None:
    """The task that makes the pool start a worker (:meth:`LocalExecutor.warm`)."""


def _exit_last() -> None:
    """Registers :func:`_exit_at_once` as the worker's newest exit handler, i.e. the first
    to run. Called by ``threading``'s shutdown, which the worker's process runs after its
    last task and its pool loop (``BaseProcess._bootstrap``), the last Python code before
    the interpreter's exit; so no handler is registered above it."""
    import atexit

    atexit.register(_exit_at_once)


def _exit_at_once() -> None:
    """A worker's exit: every other exit handler, then ``os._exit``. It runs first (see
    :func:`_exit_last`) and calls all the others itself, each once, in their usual order
    (newest first): those its tasks and warm-up registered (temp copies removed), those
    its modules registered at import, the ones the re-run main module (``__mp_main__``,
    imported before the pool's initializer) registered among them (``close_open_stores``
    for the CLI: a store left open is closed, no ``.wal`` left beside it), logging's. Its
    results were handed back (the pool's worker returned). What is left is the
    interpreter freeing every object one by one, a model's millions among them, which the
    pool's ``shutdown`` waits for: skipped."""
    import atexit
    import os
    import sys

    atexit.unregister(_exit_at_once)   # the run below must not call it again
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


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
