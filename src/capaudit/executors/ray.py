"""Ray executor: the same shard function as Ray tasks, on one machine or a cluster.

Why Ray: one code path scales from a laptop (``ray.init()`` starts a local
cluster with ``num_cpus=workers``) to many machines (``--address auto``: the
cluster this machine belongs to, or ``RAY_ADDRESS``). The import is lazy:
``ray`` is an optional extra.

A cluster's nodes share no disk. So a task receives text and plain data only
(the shard's location, the work folder's location, storage options without
credentials) and builds its file system itself, with the node's own
credentials (a pickled file system would carry the driver's keys); its outputs
go to the work folder, which must then be a URL every node reaches
(:func:`capaudit.runner.run.run_step` refuses a local path when
:meth:`RayExecutor.nodes` is above one), and its summary comes back through
Ray's object store. Each task declares its resources (``num_cpus``, and
``memory`` from ``CAPAUDIT_RAY_TASK_MB``), so Ray never packs more tasks on a
node than it has cores or memory for; a task lost with its worker or node is
retried (``max_retries``); an error raised by the shard function is not (it
is the shard's, and is reported). Ctrl-C cancels the running tasks at once.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterable, Iterator

from capaudit.errors import require

TASK_MB_ENV = "CAPAUDIT_RAY_TASK_MB"
MAX_RETRIES = 3


class RayExecutor:
    name = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, *, cpus_per_task: float = 1,
                 memory_mb: float | None = None, max_retries: int = MAX_RETRIES, **_: Any):
        from capaudit.core.ranges import env_number

        self.ray = require("ray", "ray", "the ray executor")
        self.workers = max(1, int(workers))
        self.cpus_per_task, self.max_retries = cpus_per_task, int(max_retries)
        self.memory_mb = memory_mb if memory_mb is not None else \
            env_number(TASK_MB_ENV, 0.0, 0.0, 1e7) or None
        self._started = False
        if not self.ray.is_initialized():
            kwargs = {"address": address} if address else {"num_cpus": self.workers}
            import logging

            if address:
                _probe(address)
            held = _sigterm_handler()
            try:   # Ray's own INFO lines ("Connecting to existing Ray cluster...") not shown
                self.ray.init(include_dashboard=False, log_to_driver=False,
                              ignore_reinit_error=True, logging_level=logging.WARNING,
                              **kwargs)
            except ConnectionError as exc:
                from capaudit.errors import InputError

                raise InputError(f"no Ray cluster answers at --address {address} "
                                 f"({' '.join(str(exc).split())[:120]})",
                                 fix="start one (ray start --head), set RAY_ADDRESS, or drop "
                                     "--address for a local cluster") from None
            finally:
                _restore_sigterm(held)
            self._started = True

    def nodes(self) -> int:
        """Alive nodes of the cluster (1: every task sees this machine's disk)."""
        return sum(1 for n in self.ray.nodes() if n.get("Alive") or n.get("alive"))

    def _options(self) -> dict:
        opts = {"num_cpus": self.cpus_per_task, "max_retries": self.max_retries,
                "retry_exceptions": False}
        if self.memory_mb:
            opts["memory"] = int(self.memory_mb * 2 ** 20)
        return opts

    def map_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        from capaudit.core import lean_import

        ray = self.ray
        if lean_import.enabled():   # Ray's workers are not our children: they are told
            fn = _lean(fn)
        remote = ray.remote(**self._options())(fn)
        refs = {remote.remote(t): t for t in tasks}
        pending = list(refs)
        try:
            while pending:   # 1 s slices: Ctrl-C is seen between them
                done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
                for ref in done:
                    yield refs[ref], self._result(ref)
        except BaseException:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise

    def _result(self, ref):
        """The task's result; a task Ray gave up on (its worker or node lost more than
        ``max_retries`` times) as one line."""
        from ray.exceptions import NodeDiedError, WorkerCrashedError

        try:
            return self.ray.get(ref)
        except (WorkerCrashedError, NodeDiedError) as exc:
            from capaudit.errors import InputError

            raise InputError(f"a Ray task was lost {self.max_retries + 1} times "
                             f"({type(exc).__name__})", fix="check the cluster's nodes and "
                             "memory (ray status), then rerun: finished shards are kept") \
                from None

    def close(self) -> None:
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
            self._started = False


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Refuse, within ``timeout_s``, an ``--address host:port`` where nothing accepts a
    connection: Ray itself retries its GCS for minutes (about 35 s an attempt, 20 attempts)
    printing only its own warnings. Ray reaches a loopback address at this node's IP, so
    that one is tried too; ``auto``, ``local`` and names without a port are left to Ray."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    hosts = [host.strip("[]")]
    with contextlib.suppress(Exception):
        from ray._private.services import resolve_ip_for_localhost

        hosts.append(resolve_ip_for_localhost(hosts[0]))
    reason = ""
    for name in dict.fromkeys(hosts):
        try:
            socket.create_connection((name, int(port)), timeout=timeout_s).close()
            return
        except OSError as exc:
            reason = reason or (exc.strerror or type(exc).__name__)
    from capaudit.errors import InputError

    raise InputError(f"no Ray cluster answers at --address {address} (nothing listens "
                     f"there: {reason})", fix="start one (ray start --head), pass the "
                     "address it prints, or drop --address for a local cluster")


def _lean(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` run in a Ray worker as in a process of capaudit's own (lean imports); a plain
    function, as ``ray.remote`` takes no partial."""

    @functools.wraps(fn)
    def lean_task(task: Any) -> Any:
        from capaudit.core.lean_import import enable

        enable()
        return fn(task)

    return lean_task


def _sigterm_handler():
    """This process's SIGTERM handler, from the main thread (None elsewhere)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.getsignal(signal.SIGTERM)


def _restore_sigterm(handler) -> None:
    """``ray.init`` installs its own SIGTERM handler (``sys.exit``) and leaves it: the
    command's own (a service stop ends the run as Ctrl-C does: tasks cancelled, one line,
    exit 143) is put back."""
    import signal

    if handler is not None:
        signal.signal(signal.SIGTERM, handler)
