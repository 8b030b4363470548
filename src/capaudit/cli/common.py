"""Shared CLI pieces: the ``--db`` option, consoles, progress bars, run bookkeeping.

Commands stay thin: parse options, call a plain function, print. Errors that
are the user's (:class:`capaudit.errors.CapauditError`) are turned into one
line and exit code 2 by :func:`capaudit.cli.main.main`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from capaudit.audit.config import AuditConfig

# Markup and emoji codes are off: captions, set names and query results are data, and
# "[/bold]" or ":dog:" in a caption must print as itself, not crash or turn into a picture. A line that wants style passes markup=True and
# escapes every piece of data in it with esc().
class _DataConsole(Console):
    """A console whose text (captions, set names, file names: data) cannot drive the
    terminal: control characters are printed as escapes (rich itself keeps ESC)."""

    def render_str(self, text: str, **kwargs):
        from capaudit.errors import shown

        return super().render_str(_encodable(shown(text), self.encoding), **kwargs)


def _encodable(text: str, encoding: str) -> str:
    """``text`` with what the terminal's encoding cannot show written as escapes (``é`` as
    ``\\xe9`` under ``PYTHONIOENCODING=ascii``), before rich measures it: tables stay
    aligned, and nothing reaches the stream that it would refuse."""
    if encoding.lower().replace("-", "") in ("utf8", "utf16", "utf32"):
        return text
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        return text


console = _DataConsole(markup=False, emoji=False)
err_console = _DataConsole(stderr=True, markup=False, emoji=False)
esc = escape

DB_ENV = "CAPAUDIT_DB"

DbOption = typer.Option(None, "--db", help="DuckDB file (default ./capaudit.duckdb or $CAPAUDIT_DB)")


def db_path(db: Path | None, default: str = "capaudit.duckdb") -> Path:
    """The store every command uses: ``--db``, else ``$CAPAUDIT_DB``, else ``default``."""
    return Path(db or os.environ.get(DB_ENV) or default)


def open_store(db: Path | None, read_only: bool = False, *, create: bool = False,
               sandbox: bool = False, external: bool | None = None, allow_paths: tuple = ()):
    """The store behind ``--db``, through the one opener (:mod:`capaudit.store.opener`).
    Only commands that add data pass ``create=True``; the others report a missing file
    instead of creating an empty store. ``sandbox``: no files, network or settings (the
    user's SQL, listings); ``external``/``allow_paths``: see :class:`~capaudit.store.Store`."""
    from capaudit.store import Store

    return Store(db_path(db), read_only=read_only, create=create, sandbox=sandbox,
                 external=external, allow_paths=allow_paths)


_INTERRUPT_NOTE: list[str] = []


def keep_on_interrupt(note: str | None) -> None:
    """Say what an interrupted command keeps (e.g. finished shards); main() prints it after
    "interrupted," instead of "nothing stored"."""
    _INTERRUPT_NOTE[:] = [note] if note else []


def interrupt_note() -> str | None:
    return _INTERRUPT_NOTE[0] if _INTERRUPT_NOTE else None


def audit_config(config, section: str = "audit", **cli) -> AuditConfig:
    """The resolved audit settings, once per command: CLI values (None = not given) > the
    YAML ``config``'s ``section`` > the defaults of :class:`AuditConfig`."""
    return AuditConfig.resolve(config, cli, section=section)


def progress(transient: bool = False) -> Progress:
    """A rich progress bar; quiet when stdout is not a terminal."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}", style="bold", markup=False),
                    BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=err_console, transient=transient,
                    disable=not sys.stderr.isatty() and not os.environ.get("CAPAUDIT_PROGRESS"))


class ShardProgress:
    """A sharded run's bar (the runner's ``on_start``, ``on_shard``): shard tasks done of
    all, and the captions so far (a summary's ``count``) with their rate."""

    def __init__(self, label: str, count: str):
        self.bar, self.label, self.count, self.caps = progress(), label, count, 0
        self.task, self.t0 = None, time.perf_counter()

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def start(self, n: int, workers: int) -> None:
        """``n``: the jobs planned so far; told again as each pass is planned."""
        if self.task is None:
            self.task = self.bar.add_task(f"{self.label} ({workers} worker(s))", total=n)
        else:
            self.bar.update(self.task, total=n)

    def shard(self, summary: dict) -> None:
        self.caps += summary.get(self.count) or 0
        rate = self.caps / max(time.perf_counter() - self.t0, 1e-9)
        self.bar.update(self.task, advance=1,
                        description=f"{self.label} ({self.caps:,} captions, {rate:,.0f}/s)")


def refuse_shard_options(what: str, fix: str, **given) -> None:
    """Options that only a run over shards reads (``--executor ray``, ``--address``,
    ``--workers``, ``--work-dir``, ...), given to a run without ``--shards``: one line naming
    the first. Why: such a run went on in this process and ignored them, where the user had
    meant a cluster, workers or a work folder. ``given``: each flag (``_`` for ``-``) and
    whether the command line set it."""
    from capaudit.errors import InputError

    for flag, set_ in given.items():
        if set_:
            raise InputError(f"--{flag.replace('_', '-')} applies to {what} only", fix=fix)


def print_skipped(failed: list[dict]) -> None:
    """The shards ``--skip-bad-shards`` left out, each with its one-line error."""
    for s in failed:
        console.print(f"  [red]skipped[/] {esc(s['shard'])}: {esc(s['error'])}", markup=True)


def deprecated_spelling(given, old: str, new: str):
    """``given`` (an option's value under its old spelling), after one line on stderr saying
    the new one: ``--json`` writes a JSON file in every command (docs/cli.md), so the
    commands that printed with it (or wrote JSONL) took another name."""
    if given:
        err_console.print(f"capaudit: {old} is deprecated: use {new} (--json FILE writes a "
                          "JSON file in every command)", highlight=False)
    return given


from capaudit.core.runs import recorded_run  # noqa: E402,F401  (re-exported for commands)
