"""Shared CLI pieces: the ``--db`` option, consoles, progress bars, run bookkeeping.

Commands stay thin: parse options, call a plain function, print. Errors that
are the user's (:class:`capaudit.errors.CapauditError`) are turned into one
line and exit code 2 by :func:`capaudit.cli.main.main`.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import typer
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

console = Console()
err_console = Console(stderr=True)

DB_ENV = "CAPAUDIT_DB"

DbOption = typer.Option(None, "--db", help="DuckDB file (default ./capaudit.duckdb or $CAPAUDIT_DB)")


def db_path(db: Path | None, default: str = "capaudit.duckdb") -> Path:
    """The store every command uses: ``--db``, else ``$CAPAUDIT_DB``, else ``default``."""
    return Path(db or os.environ.get(DB_ENV) or default)


def open_store(db: Path | None, read_only: bool = False):
    from capaudit.store import Store

    return Store(db_path(db), read_only=read_only)


def audit_config(config, **cli) -> dict:
    """The resolved ``audit`` settings: CLI values > YAML ``config`` > the runner's defaults."""
    from capaudit.audit.runner import DEFAULTS
    from capaudit.core.config import resolve

    return resolve(DEFAULTS, config, cli, section="audit")


def progress(transient: bool = False) -> Progress:
    """A rich progress bar; quiet when stdout is not a terminal."""
    return Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=err_console, transient=transient,
                    disable=not sys.stderr.isatty() and not os.environ.get("CAPAUDIT_PROGRESS"))


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
