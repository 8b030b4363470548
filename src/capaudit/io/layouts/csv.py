"""CSV and TSV: the delimiter, whether the first record is a header, each record with its
first line and raw text, and a revised record written in its record's own style.

Who reads and writes through it: ``sets add`` (DuckDB parses a good file, told the delimiter
and header chosen here; a rejected one is re-read here to name its row,
:mod:`capaudit.io.readers.rescan`), ``filter run --shards`` and ``sets export --to
original`` (:class:`capaudit.io.rewrite.text_lines.CsvRewriter`), label files
(:mod:`capaudit.io.labels.base`) and demographics (:mod:`capaudit.io.annotation_files`).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["delimiter", "has_header", "raw_records", "records", "record_row", "revised",
           "dict_rows"]

#: the longest field read: DuckDB's default ``max_line_size`` (2 MiB), so that a caption
#: ``sets add`` stores, ``filter run --shards`` reads too (Python's csv stops at 128 KiB)
FIELD_LIMIT = 1 << 21

#: how a last record that opens a quote it never closes is refused (see :func:`raw_records`)
NEVER_CLOSED = "a quote this record opens is never closed"

_DATA_CELL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://\S+|\S+\.(?:jpe?g|png|gif|webp))$", re.IGNORECASE)


def delimiter(path: Path) -> str:
    return "\t" if Path(path).suffix.lower() == ".tsv" else ","


def has_header(path: Path) -> bool:
    """Whether the first record names the columns: a URL or an image file name is a value,
    never a column name (Conceptual Captions' ``Validation_GCC-1.1.0-Validation.tsv`` is
    ``caption<TAB>url`` with no header, and its first caption was taken for a column name)."""
    try:
        first = next((f for _, f in records(path) if f), None)
    except (csv.Error, UnicodeDecodeError):
        return True  # the scan names the bad line
    return not any(_DATA_CELL.match(cell.strip()) for cell in first or [])


def raw_records(lines: Iterable[str], delim: str) -> Iterator[tuple[int, str, list[str]]]:
    """``(first line, raw text, fields)`` of each record, header and blank lines (no fields)
    included; the raw text is the record as read (a quoted caption may span lines), so an
    untouched record is copied back byte for byte."""
    raw: list[str] = []
    if csv.field_size_limit() < FIELD_LIMIT:
        csv.field_size_limit(FIELD_LIMIT)

    def kept(lines):
        for line in lines:
            raw.append(line)
            yield line
    reader = csv.reader(kept(lines), delimiter=delim)
    start, held = 1, None   # the last record is held back until it is known to be closed
    try:
        for fields in reader:
            if held:
                yield held
            held = (start, "".join(raw), fields)
            raw.clear()
            start = reader.line_num + 1
    except csv.Error:
        if held:          # the record before the bad one is read: the error names the next
            yield held
        raise
    if held:
        _closed(held[1], delim)
        yield held


def _closed(text: str, delim: str) -> None:
    """Raise where the file's last record opens a quote it never closes: Python's csv reads
    it to the end of the file as one field, DuckDB keeps the quote as text (and, sniffing
    no quoting, every quote of the file), so the two paths would read another caption."""
    try:
        for _ in csv.reader(io.StringIO(text), delimiter=delim, strict=True):
            pass
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise csv.Error(NEVER_CLOSED) from None


def records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line of the record, fields) for each record, header included."""
    with open(path, newline="", encoding="utf-8") as fh:
        for line, _, fields in raw_records(fh, delimiter(path)):
            yield line, fields


def record_row(path: Path, index: int) -> int:
    """File line of data record ``index`` (the header, if any, is line 1, as in a spreadsheet)."""
    skip = 1 if has_header(path) else 0
    for i, (line, fields) in enumerate(r for r in records(path) if r[1]):
        if i == index + skip:
            return line
    return index + 1 + skip


def revised(text: str, fields: list[str], delim: str) -> str:
    """A record whose fields changed, written by ``csv.writer`` with the record's line ending
    and quoting (every field quoted when ``text``, the record as read, quoted every field,
    else only where needed)."""
    end = "\r\n" if text.endswith("\r\n") else "\n" if text.endswith("\n") else ""
    quote_all = text.startswith('"') and text.count(f'"{delim}"') >= len(fields) - 1
    out = io.StringIO()
    csv.writer(out, delimiter=delim, lineterminator=end,
               quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL).writerow(fields)
    return out.getvalue()


def dict_rows(lines: Iterable[str], delim: str = ",") -> Iterator[tuple[int, dict]]:
    """``(row, record)`` keyed by the header's names, the header being row 1."""
    yield from enumerate(csv.DictReader(lines, delimiter=delim), start=2)
