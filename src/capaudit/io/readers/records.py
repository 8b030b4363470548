"""What the record readers (LLaVA, ShareGPT, ShareGPT4V, Karpathy, JSON lists) share.

- :func:`load_records`: a JSON array (streamed record by record through
  :mod:`capaudit.io.layouts.json`: a 1.2M-record ShareGPT4V file is never held whole) or a
  JSONL file, as ``(row, record)`` pairs, with one-line errors naming the row;
- ``--where``: a DuckDB SQL expression over the record's fields (:mod:`capaudit.store.where`),
  evaluated once over the file; the records it leaves out are skipped as they stream by;
- :func:`pick_turns`: which assistant turns become captions (``--turns first|all|join``);
- :class:`RecordReader`: batching, and each caption's place in the source (``meta.src``
  record index, ``meta.turn``) so that ``sets export --to original`` can write the
  revised text back into the same record;
- records without an image are refused by row, or skipped and counted
  (``--skip-no-image``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.layouts.json import is_json_array, iter_array_records, load_json_lines
from capaudit.io.readers.base import CaptionReader, read_head, row_batches

TURNS = ("first", "all", "join")
JOIN_SEP = "\n\n"


def load_records(path: Path) -> Iterator[tuple[int, object]]:
    """``(1-based row, record)`` from a JSON array (streamed) or a JSONL file."""
    if is_json_array(read_head(path, 1 << 12)):
        with open(path, "rb") as fh:
            for index, rec in iter_array_records(fh, path):
                yield index + 1, rec
        return
    yield from load_json_lines(path)


def records_layout(path: Path) -> str:
    """How :func:`capaudit.store.where.matching_records` reads ``path``'s records."""
    return "array" if is_json_array(read_head(path, 1 << 12)) else "lines"


def pick_turns(texts: list, turns: str) -> list[tuple[int | None, str]]:
    """``(turn index, text)`` captions from a record's assistant texts."""
    if turns == "first":
        return [(0, texts[0])]
    if turns == "all":
        return list(enumerate(texts))
    return [(None, JOIN_SEP.join(t for t in texts if isinstance(t, str)))]


class RecordReader(CaptionReader):
    """A reader over records; subclasses implement :meth:`captions` for one record."""

    def __init__(self, *args, **options):
        super().__init__(*args, **options)
        self.turns = options.get("turns") or "first"
        if self.turns not in TURNS:
            raise InputError(f"unknown --turns '{self.turns}'", fix="use first, all or join")
        self.where_expr = options.get("where")
        if self.where_expr is not None:
            from capaudit.store.where import checked_where

            checked_where(self.where_expr)   # refused before the file is read
        self.skip_no_image = bool(options.get("skip_no_image"))
        self.skipped_no_image = 0
        self.record_namespaces: set = set()   # each record's "namespace" field (or None)

    def captions(self, path: Path, row: int, rec) -> Iterator[tuple]:  # pragma: no cover
        """Yield ``(image key, caption, meta dict)`` for one record."""
        raise NotImplementedError

    def no_image(self, path: Path, row: int) -> None:
        """A record without an image: refused, or counted when the user asked to skip."""
        if not self.skip_no_image:
            raise InputError("record has no image (a text-only record)", path=path, row=row,
                             fix="pass --skip-no-image to skip such records (they are counted)")
        self.skipped_no_image += 1

    def where_mask(self, path: Path, layout: str | None = None):
        """Bool per record: kept by ``--where`` (``None``: no ``--where``, every record)."""
        if self.where_expr is None:
            return None
        from capaudit.store.where import matching_records

        return matching_records(path, self.where_expr, layout or records_layout(path))

    def rows(self, path: Path) -> Iterator[tuple]:
        keep = self.where_mask(path)
        for n, (row, rec) in enumerate(load_records(path)):
            if not isinstance(rec, dict):
                raise InputError("record is not a JSON object", path=path, row=row)
            if keep is None or (n < len(keep) and keep[n]):
                self.record_namespaces.add(rec.get("namespace") if isinstance(
                    rec.get("namespace"), str) else None)
                yield from self.captions(path, row, rec)

    @property
    def evidence_namespace(self) -> str | None:
        """The one namespace the records name in a ``namespace`` field (capaudit's
        conversation exports write the set's where an image's name does not say it): what
        ``sets add`` gives every row when no row's key names another dataset; None when no
        record names one or two name different ones."""
        names = self.record_namespaces - {None}
        return next(iter(names)) if len(names) == 1 else None

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        yield from self.emit(self.rows(path))

    def emit(self, rows) -> Iterator[pa.RecordBatch]:
        """Batches of :meth:`captions`' ``(image key, caption, meta dict)`` rows."""
        yield from row_batches(((str(key), parse_image_id(key), cap,
                                 json.dumps(meta) if meta else None, None)
                                for key, cap, meta in rows), self)
