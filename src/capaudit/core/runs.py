"""The ``runs`` row around a command's work, shared by the CLI and :mod:`capaudit.api`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def recorded_run(store, config: dict, seed: int | None = None) -> Iterator[int]:
    """Record a run (command, resolved config, seed, versions) around a block.

    The run row is committed first so a failure still leaves an honest
    'failed' status; the block's own writes use their own transactions.
    """
    from capaudit.core.config import current_command, package_versions

    run_id = store.start_run(current_command(), config, seed,
                             package_versions())
    try:
        yield run_id
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    store.finish_run(run_id, "ok")
