"""The error path of the DuckDB readers: re-read a rejected file in Python to name its row.

Why apart from :mod:`capaudit.io.readers.tabular`: DuckDB reads the files (the hot
path, in C++); only when it rejects one, or a record has to be named, do these plain
Python scans run, line by line, to find the exact bad row with a fix for it. Nothing
here is used while a good file is read.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Sequence

from capaudit.errors import InputError
from capaudit.io.layouts import csv as csv_layout


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


def scan_csv(path: Path) -> InputError | None:
    """The first line that is not UTF-8, malformed quoting, or a record whose width is not
    the header's."""
    err = scan_lines(path, lambda row, text: None)
    if err:
        return err
    width, after = None, 1   # after: the line the next record starts on
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for line, text, fields in csv_layout.raw_records(fh, csv_layout.delimiter(path)):
                after = line + text.count("\n")
                if not fields:
                    continue
                if width is None:
                    width = len(fields)
                elif len(fields) != width:
                    return InputError(f"{len(fields)} fields where the header has {width}",
                                      path=path, row=line,
                                      fix="quote fields holding the delimiter; one value "
                                          "per header column")
    except csv.Error as e:   # an unclosed quote runs on until a field is too large
        return InputError(f"malformed CSV ({e})", path=path, row=after,
                          fix="close the quote this record opens; a field holds at most "
                              f"{csv.field_size_limit():,} characters")
    return no_records(path) if width is None else None


#: how Python's csv stops at a field longer than its limit (an open quote read on to the end)
_FIELD_TOO_LARGE = "field larger than field limit"


def tsv_left_open(path: Path) -> InputError | None:
    """A .tsv whose last record opens a quote it never closes, named as :func:`scan_csv`
    names it. DuckDB's sniffer reads such a file with no quoting, storing the quote as text,
    where the ``--shards`` reader (Python's csv) refuses it; a .csv is read with ``quote='"'``
    and refused by DuckDB itself. A quote left open with more than ``FIELD_LIMIT`` (2 MiB)
    after it ends Python's read with csv's field-limit error instead: refused the same way
    (as is a closed field that long, which ``--shards`` refuses too). Only a file in which a
    field starts with a quote is read through here; any other error is left to DuckDB."""
    if csv_layout.delimiter(path) != "\t" or not _field_opens_quote(path):
        return None
    try:
        for _ in csv_layout.records(path):
            pass
    except csv.Error as e:
        if str(e) == csv_layout.NEVER_CLOSED or str(e).startswith(_FIELD_TOO_LARGE):
            return scan_csv(path)
    except UnicodeDecodeError:
        pass
    return None


def _field_opens_quote(path: Path) -> bool:
    """Whether a ``"`` stands first on a line or after a tab, read in 1 MiB blocks (a
    million-caption .tsv with no such quote is not parsed in Python)."""
    before = b"\n"   # the file's start counts as a line's
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            text = before + block
            if b'"' in block and (b'\n"' in text or b'\t"' in text):
                return True
            before = block[-1:]
    return False


def nested_records(path: Path, columns: list[tuple]) -> InputError | None:
    """One line for a JSON document that wraps its records in a list under one key
    (TextCaps' ``{"dataset_name": "textcaps", ..., "data": [{...}, ...]}``): name the key, the
    records' fields and how to read them, rather than "no caption column" among the wrapper's
    keys. ``columns`` are DuckDB's DESCRIBE rows (name, type, ...)."""
    for name, typ, *_ in columns:
        if typ.startswith("STRUCT(") and typ.endswith(")[]"):
            typed = re.findall(r"(?:\(|, )\"?(\w+)\"? ([\w\[\]]+)", typ[6:-2])
            fields = [f for f, _ in typed]
            cap = next((f for f, t in typed if "caption" in f.lower() and t == "VARCHAR"),
                       "FIELD")
            shown = ", ".join(fields[:12]) + (", ..." if len(fields) > 12 else "")
            return InputError(f"the records are in the list under '{name}' (fields: {shown}), "
                              "not one per line", path=path,
                              fix=f"write them one per line (jq -c '.{name}[]' FILE > "
                                  f"records.jsonl) and add that with --caption-col {cap}")
    return None


_COMPRESSED = (b"\x1f\x8b", b"(\xb5/\xfd")   # gzip, zstd: DuckDB reads them expanded


def compressed(path: Path) -> bool:
    """Whether ``path`` is gzip or zstd compressed and named so (``.gz``, ``.zst``: DuckDB
    then reads it expanded), so the Python rescans of the raw bytes, which would call it
    "not UTF-8", are skipped for it."""
    if path.suffix.lower() not in (".gz", ".gzip", ".zst"):
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(4).startswith(_COMPRESSED)
    except OSError:
        return False


def oversized(path: Path, exc: Exception) -> InputError | None:
    """One line for a record (or line) past DuckDB's size limit: too large, not malformed
    (a gzip bomb expands one "record" to gigabytes)."""
    text = str(exc)
    m = re.search(r'"(maximum_object_size|max_line_size)" of (\d+) bytes exceeded', text)
    if m is None:
        return None
    packed = " once decompressed" if compressed(path) else ""
    return InputError(f"a record is larger than {int(m.group(2)) >> 20} MB{packed}: too large "
                      "to be a caption record", path=path,
                      fix="check the file (a compressed file that expands this far is "
                          "refused, not read); a caption record needs far less")
