"""Line-based sources back in their own layout: CSV/TSV and Flickr ``.token`` files.

CSV/TSV: the file's own delimiter and header (or none), each record's raw text kept (a
quoted caption may span lines): an untouched record is copied as read, a revised one is
written by ``csv.writer`` with that delimiter, the record's own line ending, and its
quoting (every field quoted when the record quoted every field, else only where needed).
A record's index is its place among the data records, blank lines skipped, as DuckDB's
reader numbers them for ``sets add``. Flickr tokens: ``IMAGE#N<TAB>caption`` per line.
"""

from __future__ import annotations

import csv
import io
from typing import Iterator, NamedTuple

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.rewrite.base import Changes, Place, Record, Rewriter, own_changes

__all__ = ["CsvRaw", "CsvRewriter", "FlickrTokenRewriter"]


class CsvRaw(NamedTuple):
    """A CSV record as read: its raw text (copied back when untouched), its fields, and the
    file's column names (the header's, or ``column0`` ... without one), so that another
    column of the record (``--reference-col``) can be read by name."""
    text: str
    fields: list
    names: list


class CsvRewriter(Rewriter):
    def __init__(self, *args, delimiter: str = ",", header: bool = True,
                 caption_col: str | None = None, id_col: str | None = None,
                 caption_candidates=("caption",), id_candidates=("image_id",), **kw):
        super().__init__(*args, **kw)
        self.delimiter, self.header = delimiter, header
        self.given = (caption_col, id_col, caption_candidates, id_candidates)
        self.cap = self.idc = None
        self.names: list[str] = []

    def _lines(self, raw: list[str]) -> Iterator[str]:
        text = io.TextIOWrapper(self.src, encoding="utf-8", newline="")
        for line in text:
            raw.append(line)
            yield line

    def _columns(self, names: list[str]) -> None:
        caption_col, id_col, caps, ids = self.given
        self.names = names
        self.cap = _index(names, caption_col, caps, self.path, "caption", required=True)
        self.idc = _index(names, id_col, ids, self.path, "image id", required=False)

    def records(self) -> Iterator[Record]:
        raw: list[str] = []
        reader = csv.reader(self._lines(raw), delimiter=self.delimiter)
        index = 0
        for fields in reader:
            text = "".join(raw)
            raw.clear()
            if not fields:
                yield Record(-1, [], (text, None), len(text))
                continue
            if self.cap is None:
                if self.header:
                    self._columns(fields)
                    yield Record(-1, [], (text, None), len(text))
                    continue
                self._columns([f"column{i}" for i in range(len(fields))])
            cap = fields[self.cap] if self.cap < len(fields) else None
            key = fields[self.idc] if self.idc is not None and self.idc < len(fields) \
                else str(index)
            places = [] if cap is None else [Place(None, cap, key, parse_image_id(key))]
            yield Record(index, places, CsvRaw(text, fields, self.names), len(text))
            index += 1

    def write_record(self, rec: Record, changes: Changes) -> bool:
        text, fields = rec.raw[:2]
        mine = own_changes(rec, changes) if rec.index >= 0 else None
        if mine:
            new = mine[None]
            if new is None:
                self.log.dropped(rec.index, chars=len(fields[self.cap]))
                return False
            self.log.revised(rec.index, fields[self.cap], new, column=self.cap)
            fields = list(fields)
            fields[self.cap] = new
            end = "\r\n" if text.endswith("\r\n") else "\n" if text.endswith("\n") else ""
            out = io.StringIO()
            quote_all = text.startswith('"') and text.count(f'"{self.delimiter}"') >= \
                len(fields) - 1
            csv.writer(out, delimiter=self.delimiter, lineterminator=end,
                       quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL).writerow(fields)
            text = out.getvalue()
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
        for i, line in enumerate(io.TextIOWrapper(self.src, encoding="utf-8", newline="")):
            head, _, rest = line.partition("\t")
            text = rest.rstrip("\r\n")
            yield Record(i, [Place(None, text, head.split("#")[0])], line, len(line))

    def write_record(self, rec: Record, changes: Changes) -> bool:
        line = rec.raw
        mine = own_changes(rec, changes)
        if mine:
            head, _, rest = line.partition("\t")
            text = mine[None]
            if text is None:
                self.log.dropped(rec.index, chars=len(rest.rstrip("\r\n")))
                return False
            self.log.revised(rec.index, rest.rstrip("\r\n"), text)
            line = f"{head}\t{text}" + ("\n" if line.endswith("\n") else "")
        self.out.write(line.encode("utf-8"))
        return True
