"""The ``runs`` row around a command's work, shared by the CLI and :mod:`capaudit.api`;
whether the process behind a run (or a work folder's lock) still lives."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def recorded_run(store, config: dict, seed: int | None = None) -> Iterator[int]:
    """Record a run (command, resolved config, seed, versions) around a block.

    The run row is committed first so a crash still leaves an honest 'failed'
    status (Ctrl-C: 'interrupted'; SIGKILL: 'killed', set by the next process
    that opens the store). A command that rejects its input (a
    :class:`~capaudit.errors.CapauditError`: one line, exit 2, its writes
    rolled back) leaves no row at all: nothing ran.
    """
    from capaudit.core.config import current_command, package_versions
    from capaudit.errors import CapauditError

    run_id = store.start_run(current_command(), config, seed,
                             package_versions())
    try:
        yield run_id
    except CapauditError:
        store.discard_run(run_id)
        raise
    except KeyboardInterrupt:
        store.finish_run(run_id, "interrupted")
        raise
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    store.finish_run(run_id, "ok")


def process_alive(pid) -> bool:
    """Whether process ``pid`` of this host still lives (``os.kill(pid, 0)``)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OverflowError):
        return True   # exists under another user (or cannot tell): leave it alone
    return True
