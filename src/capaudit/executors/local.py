"""Local executor: in-process for one worker, a process pool for more.

Why processes, not threads: detectors and local models hold the GIL in
Python glue code; processes scale on CPU. One worker runs in the calling
process, which keeps tests fast and tracebacks plain. The pool uses the
``spawn`` context so workers never inherit a half-initialised torch or an
open DuckDB connection from the parent.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterable, Iterator


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int = 1, **_: Any):
        self.workers = max(1, int(workers))
        self._pool: ProcessPoolExecutor | None = None

    def map_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        tasks = list(tasks)
        if self.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                yield task, fn(task)
            return
        self._pool = ProcessPoolExecutor(max_workers=min(self.workers, len(tasks)),
                                         mp_context=mp.get_context("spawn"))
        futures = {self._pool.submit(fn, t): t for t in tasks}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield futures[fut], fut.result()
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
