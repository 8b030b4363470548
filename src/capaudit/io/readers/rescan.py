"""The error path of the DuckDB readers: re-read a rejected file in Python to name its row.

Why apart from :mod:`capaudit.io.readers.tabular`: DuckDB reads the files (the hot
path, in C++); only when it rejects one, or a record has to be named, do these plain
Python scans run, line by line, to find the exact bad row with a fix for it. Nothing
here is used while a good file is read.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterator, Sequence

from capaudit.errors import InputError


def scan_lines(path: Path, check) -> InputError | None:
    """The first line that is not UTF-8, or the first error ``check(row, text)`` returns."""
    with open(path, "rb") as fh:
        for row, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                return InputError("not valid UTF-8", path=path, row=row,
                                  fix="re-encode the file as UTF-8")
            err = check(row, text)
            if err:
                return err
    return None


def no_records(path: Path) -> InputError | None:
    """An error if the file holds nothing but blank lines."""
    with open(path, "rb") as fh:
        if any(line.strip() for line in fh):
            return None
    return InputError("the file holds no captions", path=path, fix="check the path")


def scan_jsonl(path: Path, caption_col: str | None,
               caption_candidates: Sequence[str]) -> InputError | None:
    """The first line that is not a JSON object, or whose caption is not a string
    (``caption_col``, else the first of ``caption_candidates`` the record has)."""
    def check(row, text):
        if not text.strip():
            return None
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as e:
            return InputError(f"malformed JSON ({e.msg})", path=path, row=row,
                              fix="one JSON object per line")
        except RecursionError:
            return InputError("JSON nested too deeply", path=path, row=row,
                              fix="flatten the record")
        if not isinstance(rec, dict):
            return InputError("line is not a JSON object", path=path, row=row,
                              fix="one JSON object per line")
        col = caption_col or next((c for c in caption_candidates if c in rec), None)
        caption = rec.get(col) if col else None
        if caption is not None and not isinstance(caption, str):
            return InputError(f"caption is not a string (got {type(caption).__name__})",
                              path=path, row=row, fix="captions must be JSON strings")
        return None
    return scan_lines(path, check) or no_records(path)


def jsonl_record_row(path: Path, index: int) -> int:
    """Line number of record ``index``: DuckDB skips blank lines, the count does not."""
    seen = -1
    with open(path, "rb") as fh:
        for row, raw in enumerate(fh, start=1):
            if raw.strip():
                seen += 1
                if seen == index:
                    return row
    return index + 1


def csv_delimiter(path: Path) -> str:
    return "\t" if path.suffix.lower() == ".tsv" else ","


def csv_records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line of the record, fields) for each record, header included."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter=csv_delimiter(path))
        start = 1
        for fields in reader:
            yield start, fields
            start = reader.line_num + 1


def csv_record_row(path: Path, index: int) -> int:
    """File line of data record ``index`` (the header is line 1, as in a spreadsheet)."""
    for i, (line, fields) in enumerate(r for r in csv_records(path) if r[1]):
        if i == index + 1:
            return line
    return index + 2


def scan_csv(path: Path) -> InputError | None:
    """The first line that is not UTF-8, malformed quoting, or a record whose width is not
    the header's."""
    err = scan_lines(path, lambda row, text: None)
    if err:
        return err
    width = None
    try:
        for line, fields in csv_records(path):
            if not fields:
                continue
            if width is None:
                width = len(fields)
            elif len(fields) != width:
                return InputError(f"{len(fields)} fields where the header has {width}",
                                  path=path, row=line,
                                  fix="quote fields holding the delimiter; one value per "
                                      "header column")
    except csv.Error as e:
        return InputError(f"malformed CSV ({e})", path=path, fix="check the quoting")
    return no_records(path) if width is None else None
