"""How ``capaudit query`` prints a result: streamed, one batch at a time.

A result that fits in one batch prints as every capaudit table does (rich). A longer one
prints as a plain aligned grid, batch by batch: rich lays a table out at ~0.8 ms a row
(100,000 rows: 81 CPU seconds, and the whole table held: 1 GB), which for millions of rows
piped to a file is most of an hour. Every cell is escaped as the console escapes data
(control characters written out, characters the terminal's encoding lacks as escapes).
"""

from __future__ import annotations

import csv
import json
import sys
from typing import Iterable, Iterator

from capaudit.cli.common import _encodable, console

__all__ = ["print_result"]


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
