"""The executor contract and its registry.

Why an executor abstraction: the enrichment work is "apply a pure shard
function to a list of shard tasks". Whether that happens in this process, in
a local process pool or on a Ray cluster must not change a single output
byte, so the executors only *schedule*; all output writing (tmp + rename +
marker) happens inside the shard function itself. Results come back as they
complete, so the caller can drive a progress bar.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol

from capaudit.core.registry import Registry


class Executor(Protocol):
    """Runs ``fn(task)`` for each task; yields (task, result) as they complete."""

    name: str

    def map_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        ...

    def close(self) -> None:
        ...


EXECUTORS: Registry = Registry("executor")
EXECUTORS.register("local", "capaudit.executors.local:LocalExecutor", version="1",
                   description="in-process (1 worker) or a local process pool")
EXECUTORS.register("ray", "capaudit.executors.ray:RayExecutor", version="1", extra="ray",
                   description="Ray tasks on a local or remote cluster (--address auto)")


# the executors that run on a cluster named by ``--address``
CLUSTER_EXECUTORS = ("ray",)


def check_executor(name: str, address: str | None = None) -> None:
    """:func:`check_address`, and an executor no one registered: one line, for a command to
    call where its options are resolved, before any work."""
    EXECUTORS.entry(name)
    check_address(name, address)


def check_address(name: str, address: str | None) -> None:
    """Refuse, in one line, ``--address`` (or the YAML's ``address:``) with an executor that
    joins no cluster. Why: the local executor has no cluster to join, so the address was
    ignored and the run went on on this machine, where the user had meant a cluster. Read by
    :class:`capaudit.runner.step.RunOptions` (every run of the runner, from the CLI or the
    API) and by each command before its work."""
    if address is not None and name not in CLUSTER_EXECUTORS:
        from capaudit.errors import UsageError

        raise UsageError(f"--address needs --executor ray (the executor here is {name!r}, "
                         "which joins no cluster)", fix="add --executor ray to run on that "
                         "cluster, or drop the address (--address, or address: in a judged "
                         "command's YAML) to run here")


def get_executor(name: str, workers: int = 1, **options) -> Executor:
    """Instantiate a registered executor by name."""
    return EXECUTORS.get(name)(workers=workers, **options)


def require_shared(executor, location, *, what: str = "work folder",
                   flag: str = "--work-dir") -> None:
    """Refuse, in one line, a local path as the run folder (``what``, given by ``flag``) of
    an executor whose workers share no disk (a Ray cluster of several nodes: each shard's
    outputs would land on whichever node ran it, where the driver never looks).
    ``file:///PATH`` says PATH is mounted on every node."""
    from capaudit.core.storage.urls import is_url, shown_url
    from capaudit.errors import InputError

    nodes = getattr(executor, "nodes", lambda: 1)()
    if nodes > 1 and not is_url(location):
        raise InputError(f"the Ray cluster has {nodes} nodes and they share no disk: a local "
                         f"{what} would be written on whichever node ran each shard",
                         path=shown_url(location), fix=f"pass {flag} s3://BUCKET/PREFIX (or "
                         "gs://...), or file:///PATH if every node mounts PATH")
