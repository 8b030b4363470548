"""``capaudit query`` (plain SQL over the store) and ``capaudit demo``.

The result is streamed: printed (a table, ``--csv`` or ``--print-json`` lines) one batch at a
time, or written with ``--out FILE`` by DuckDB's ``COPY`` into the one writer's temporary
file (:mod:`capaudit.core.safe_write`: never a link, the store or a registered source);
memory does not grow with the number of rows.

How it prints (:func:`print_result`): a result that fits in one batch prints as every
capaudit table does (rich). A longer one prints as a plain aligned grid, batch by batch: rich
lays a table out at ~0.8 ms a row (100,000 rows: 81 CPU seconds, and the whole table held:
1 GB), which for millions of rows piped to a file is most of an hour. Every cell is escaped as
the console escapes data (control characters written out, characters the terminal's encoding
lacks as escapes).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Iterable, Iterator, Optional

import typer

from capaudit.cli.common import (DbOption, _encodable, console, db_path, deprecated_spelling,
                                 open_store)
from capaudit.demo import build_demo
from capaudit.store.query import copy_query, query_stream
from capaudit.errors import InputError

_SUFFIX_FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json",
                   ".parquet": "parquet"}


def _out_format(out: Path, as_csv: bool, as_json: bool) -> str:
    if as_csv or as_json:
        return "csv" if as_csv else "json"
    fmt = _SUFFIX_FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise InputError("cannot tell the output format from the file name", path=out,
                         fix="name it .csv, .jsonl or .parquet, or pass --csv or --print-json")
    return fmt


def _write_file(db, sql: str, out: Path, fmt: str) -> None:
    """``COPY`` of the result into our temporary file beside ``out``, renamed into place."""
    from capaudit.core.config import provenance_beside
    from capaudit.core.safe_write import atomic_path, check_file_target, is_stream

    if not is_stream(out):   # the provenance file beside it is checked before any work
        check_file_target(out.with_name(out.name + ".provenance.json"))
    with atomic_path(out) as tmp:
        with open_store(db, read_only=True, sandbox=True, allow_paths=(tmp,)) as store:
            copy_query(store, sql, str(tmp), fmt)
    provenance_beside(out, {"sql": sql, "format": fmt})
    console.print(f"wrote {out} ({fmt})")


def _cells(row, encoding: str) -> list[str]:
    from capaudit.errors import shown

    return [_encodable(shown("" if v is None else str(v), one_line=True), encoding)
            for v in row]


def _grid(cols: list[str], batches: Iterator[list[tuple]], first: list[tuple]) -> None:
    """Plain aligned lines per batch: a header once, then rows; widths per batch."""
    from rich.cells import cell_len

    encoding = console.encoding
    header = _cells(cols, encoding)
    out = sys.stdout
    for n, rows in enumerate(_chain(first, batches)):
        lines = [_cells(r, encoding) for r in rows]
        widths = [max([cell_len(header[i])] + [cell_len(c[i]) for c in lines])
                  for i in range(len(header))]

        def line(cells: list[str]) -> str:
            return " | ".join(c + " " * (w - cell_len(c)) for c, w in zip(cells, widths))
        if n == 0:
            out.write(line(header).rstrip() + "\n")
            out.write("-+-".join("-" * w for w in widths) + "\n")
        out.write("".join(line(c).rstrip() + "\n" for c in lines))


def _chain(first, rest) -> Iterator:
    yield first
    yield from rest


def _rich_table(cols: list[str], rows: list[tuple]) -> None:
    from rich.table import Table

    table = Table(*cols)
    for r in rows:
        table.add_row(*["" if v is None else str(v) for v in r])
    console.print(table)


def print_result(cols: list[str], batches: Iterable[list[tuple]], *, as_csv: bool = False,
                 as_json: bool = False) -> None:
    """The result as CSV, JSON lines or a table, one batch held at a time."""
    batches = iter(batches)
    if as_csv:
        writer = csv.writer(sys.stdout)
        writer.writerow(cols)
        for rows in batches:
            writer.writerows(rows)
        return
    if as_json:
        for rows in batches:
            sys.stdout.write("".join(json.dumps(dict(zip(cols, r)), default=str) + "\n"
                                     for r in rows))
        return
    first = next(batches, [])
    second = next(batches, None)
    if second is None:   # one batch: the table as capaudit prints every table
        _rich_table(cols, first)
        return
    _grid(cols, _chain(second, batches), first)


def query(sql: str = typer.Argument(..., help="SQL to run against the store"),
          as_csv: bool = typer.Option(False, "--csv", help="Print (or write) CSV"),
          as_json: bool = typer.Option(False, "--print-json", help="Print (or write) JSON lines"),
          old_json: bool = typer.Option(False, "--json", hidden=True,
                                        help="Deprecated: --print-json"),
          out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the result to "
                                             "this file (.csv, .jsonl or .parquet, or as "
                                             "--csv/--print-json say)"),
          write: bool = typer.Option(False, "--write", help="Allow statements that modify the store"),
          db: Path = DbOption):
    """Run SQL against the store (read-only unless --write); rows are streamed."""
    as_json = as_json or deprecated_spelling(old_json, "query --json", "--print-json")
    if as_csv and as_json:
        raise InputError("--csv and --print-json exclude each other", fix="pass one of them")
    if out is not None:
        if write:
            raise InputError("--out writes a query's result; --write changes the store",
                             fix="run the change without --out, then query with --out")
        from capaudit.core.safe_write import check_file_target

        open_store(db, read_only=True, sandbox=True).close()  # the store and its sources
        check_file_target(out)   # a link, a folder, the store or a source: refused first
        _write_file(db, sql, out, _out_format(out, as_csv, as_json))
        return
    store = open_store(db, read_only=not write, sandbox=True)
    cols, batches = query_stream(store, sql)
    print_result(cols, batches, as_csv=as_csv, as_json=as_json)


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
