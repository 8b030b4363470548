"""``capaudit query`` (plain SQL over the store) and ``capaudit demo``."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from capaudit.cli.common import DbOption, console, db_path, open_store
from capaudit.demo import build_demo
from capaudit.store.query import run_query


def query(sql: str = typer.Argument(..., help="SQL to run against the store"),
          as_csv: bool = typer.Option(False, "--csv", help="Print CSV"),
          as_json: bool = typer.Option(False, "--print-json", help="Print JSON lines"),
          old_json: bool = typer.Option(False, "--json", hidden=True,
                                        help="Deprecated: --print-json"),
          write: bool = typer.Option(False, "--write", help="Allow statements that modify the store"),
          db: Path = DbOption):
    """Run SQL against the store (read-only unless --write)."""
    from capaudit.cli.common import deprecated_spelling

    as_json = as_json or deprecated_spelling(old_json, "query --json", "--print-json")
    store = open_store(db, read_only=not write, sandbox=True)
    cols, rows = run_query(store, sql)
    if as_csv:
        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    elif as_json:
        for r in rows:
            sys.stdout.write(json.dumps(dict(zip(cols, r)), default=str) + "\n")
    else:
        table = Table(*cols)
        for r in rows:
            table.add_row(*["" if v is None else str(v) for v in r])
        console.print(table)


def demo(db: Path = typer.Option(None, "--db", help="Where to build the demo database "
                                 "(replaced; default $CAPAUDIT_DB, else ./capaudit-demo.duckdb; "
                                 "a store holding other sets is refused)"),
         report: Path = typer.Option(Path("capaudit-demo-report"), "--report",
                                     help="Folder for report.md / report.html")):
    """Build a fresh demo database from bundled COCO data and compare coco, oscar and nic."""
    db = db_path(db, default="capaudit-demo.duckdb")
    result = build_demo(db, report)
    console.print(f"demo database: {db} (sets: {', '.join(result['sets'])})")
    if "compare" in result:
        from capaudit.cli.compare_view import print_compare
        print_compare(result["compare"])
        console.print(f"report: {report / 'report.md'} and {report / 'report.html'}")
    console.print(f"try: capaudit query --db {db} \"SELECT * FROM metrics LIMIT 10\"")


def register(app: typer.Typer) -> None:
    app.command("query")(query)
    app.command("demo")(demo)
