"""Line-based sources back in their own layout: CSV/TSV and Flickr ``.token`` files.

Each read and written by its layout (:mod:`capaudit.io.layouts.csv`: an untouched record
copied as read, a revised one in the record's own style; :mod:`capaudit.io.layouts.
flickr_tokens`). A CSV record's index is its place among the data records, blank lines
skipped, as DuckDB's reader numbers them for ``sets add``.
"""

from __future__ import annotations

import contextlib
import csv
import io
from typing import Iterator, NamedTuple

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.layouts import csv as csv_layout
from capaudit.io.layouts import flickr_tokens
from capaudit.io.rewrite.base import Changes, Place, Record, Rewriter, own_changes

__all__ = ["CsvRaw", "CsvRewriter", "FlickrTokenRewriter"]


class CsvRaw(NamedTuple):
    """A CSV record as read: its raw text (copied back when untouched), its fields, and the
    file's column names (the header's, or ``column0`` ... without one), so that another
    column of the record (``--reference-col``) can be read by name."""
    text: str
    fields: list
    names: list


def _unreadable(path, exc: Exception) -> InputError:
    """The one line of a CSV shard that is not UTF-8, not CSV or ragged: ``sets add``'s scan
    names its row (a local file), else the file and the error."""
    from pathlib import Path

    from capaudit.io.readers.rescan import scan_csv

    err = None
    with contextlib.suppress(OSError):   # a shard on object storage: no row
        err = scan_csv(Path(path))
    return err or InputError(f"cannot read as CSV ({exc})", path=path,
                             fix="re-encode the file as UTF-8 and check its quoting")


class CsvRewriter(Rewriter):
    def __init__(self, *args, delimiter: str = ",", header: bool = True,
                 caption_col: str | None = None, id_col: str | None = None,
                 caption_candidates=("caption",), id_candidates=("image_id",), **kw):
        super().__init__(*args, **kw)
        self.delimiter, self.header = delimiter, header
        self.given = (caption_col, id_col, caption_candidates, id_candidates)
        self.cap = self.idc = None
        self.names: list[str] = []

    def _columns(self, names: list[str]) -> None:
        caption_col, id_col, caps, ids = self.given
        self.names = names
        self.cap = _index(names, caption_col, caps, self.path, "caption", required=True)
        self.idc = _index(names, id_col, ids, self.path, "image id", required=False)

    def records(self) -> Iterator[Record]:
        try:
            yield from self._records()
        except (UnicodeDecodeError, csv.Error) as exc:   # named as sets add names it
            raise _unreadable(self.path, exc) from None

    def _records(self) -> Iterator[Record]:
        index = 0
        lines = io.TextIOWrapper(self.src, encoding="utf-8", newline="")
        for _, text, fields in csv_layout.raw_records(lines, self.delimiter):
            if not fields:
                yield Record(-1, [], (text, None), len(text))
                continue
            if self.cap is None:
                if self.header:   # a BOM is no part of the first name (DuckDB drops it too)
                    self._columns([fields[0].removeprefix("\ufeff"), *fields[1:]])
                    yield Record(-1, [], (text, None), len(text))
                    continue
                self._columns([f"column{i}" for i in range(len(fields))])
            if len(fields) != len(self.names):   # sets add refuses it: the same line
                raise csv.Error(f"{len(fields)} fields where the header has {len(self.names)}")
            cap = fields[self.cap] if self.cap < len(fields) else None
            raw = fields[self.idc] if self.idc is not None and self.idc < len(fields) else None
            # no id column: the record's number is its key, never its image id (as sets add)
            key = str(index) if raw is None else raw
            places = [] if cap is None else [Place(None, cap, key, parse_image_id(raw))]
            yield Record(index, places, CsvRaw(text, fields, self.names), len(text))
            index += 1

    def write_record(self, rec: Record, changes: Changes) -> bool:
        text, fields = rec.raw[:2]
        mine = own_changes(rec, changes) if rec.index >= 0 else None
        if mine:
            if not self.log.one_caption(rec.index, fields[self.cap], mine[None],
                                        column=self.cap):
                return False
            fields = list(fields)
            fields[self.cap] = mine[None]
            text = csv_layout.revised(text, fields, self.delimiter)
        self.out.write(text.encode("utf-8"))
        return True


def _index(names: list[str], given: str | None, candidates, path: str, what: str,
           required: bool) -> int | None:
    if given is not None:
        if given not in names:
            raise InputError(f"no column '{given}' (columns: {', '.join(names)})", path=path,
                             fix=f"pass the {what} column the set was registered with")
        return names.index(given)
    found = next((c for c in candidates if c in names), None)
    if found is None and required:
        raise InputError(f"no {what} column (columns: {', '.join(names)})", path=path,
                         fix=f"pass --caption-col naming the {what} column")
    return None if found is None else names.index(found)


class FlickrTokenRewriter(Rewriter):
    """``IMAGE#N<TAB>caption`` lines; a record is a line (its index the line's)."""

    def records(self) -> Iterator[Record]:
        for row, line in flickr_tokens.lines(self.src, self.path):
            i = row - 1
            name, text = flickr_tokens.split(line)
            yield Record(i, [Place(None, text, name)], line, len(line))

    def write_record(self, rec: Record, changes: Changes) -> bool:
        line = rec.raw
        mine = own_changes(rec, changes)
        if mine:
            if not self.log.one_caption(rec.index, rec.places[0].text, mine[None]):
                return False
            line = flickr_tokens.revised(line, mine[None])
        self.out.write(line.encode("utf-8"))
        return True
