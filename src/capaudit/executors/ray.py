"""Ray executor: the same shard function as Ray tasks.

Why Ray: one code path scales from a laptop (``ray.init()`` starts a local
cluster with ``num_cpus=workers``) to many machines (``--address auto``).
Shard outputs are written by the task itself to the shared output folder,
so the files are identical to a local run; only scheduling differs. The
import is lazy: ``ray`` is an optional extra.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from capaudit.errors import require


class RayExecutor:
    name = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, **_: Any):
        self.ray = require("ray", "ray", "the ray executor")
        self.workers = max(1, int(workers))
        self._started = False
        if not self.ray.is_initialized():
            kwargs = {"address": address} if address else {"num_cpus": self.workers}
            self.ray.init(include_dashboard=False, log_to_driver=False,
                          ignore_reinit_error=True, **kwargs)
            self._started = True

    def map_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=2)(fn)
        refs = {remote.remote(t): t for t in tasks}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield refs[ref], ray.get(ref)

    def close(self) -> None:
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
            self._started = False
