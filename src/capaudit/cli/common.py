"""Shared CLI pieces: the ``--db`` option, consoles, progress bars, run bookkeeping.

Commands stay thin: parse options, call a plain function, print. Errors that
are the user's (:class:`capaudit.errors.CapauditError`) are turned into one
line and exit code 2 by :func:`capaudit.cli.main.main`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

console = Console()
err_console = Console(stderr=True)

DB_ENV = "CAPAUDIT_DB"

DbOption = typer.Option(None, "--db", help="DuckDB file (default ./capaudit.duckdb or $CAPAUDIT_DB)")


def db_path(db: Path | None) -> Path:
    return Path(db or os.environ.get(DB_ENV) or "capaudit.duckdb")


def open_store(db: Path | None, read_only: bool = False):
    from capaudit.store import Store

    return Store(db_path(db), read_only=read_only)


def progress(transient: bool = False) -> Progress:
    """A rich progress bar; quiet when stdout is not a terminal."""
    return Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=err_console, transient=transient,
                    disable=not sys.stderr.isatty() and not os.environ.get("CAPAUDIT_PROGRESS"))


from capaudit.core.runs import recorded_run  # noqa: E402,F401  (re-exported for commands)
