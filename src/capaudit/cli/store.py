"""``capaudit store``: the store file itself (``store check``)."""

from __future__ import annotations

from pathlib import Path

import typer

from capaudit.cli.common import DbOption, console, db_path

store_app = typer.Typer(no_args_is_help=True, help="Check the store file itself.")


@store_app.command("check")
def check(db: Path = DbOption):
    """Read every table of the store in full, read-only; exit 2 when something is damaged."""
    from capaudit.store.check import check_store

    report = check_store(db_path(db))
    console.print(f"{report.path}: {report.size:,} bytes, schema "
                  f"{report.schema_version if report.schema_version is not None else '?'}")
    for name, got in report.tables.items():
        console.print(f"  {name}: " + (f"{got:,} rows, readable" if isinstance(got, int)
                                        else got))
    if report.ok:
        console.print("the store reads whole")
        return
    bad = [n for n, v in report.tables.items() if not isinstance(v, int)]
    console.print("problems: " + "; ".join(
        ([report.problem] if report.problem else []) +
        ([f"{len(bad)} table(s) unreadable ({', '.join(bad)})"] if bad else [])))
    console.print(f"restore the last good copy of {report.path.name} (capaudit opens a "
                  "damaged store for no command, so that nothing is computed on part of it)")
    raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
