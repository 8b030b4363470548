"""Parquet back as parquet: the same schema (metadata included), every column, the row order,
the row groups (each source row group is one row group out, less its dropped rows; one over
:data:`PENDING_BYTES` of Arrow data is written in parts, so memory stays bounded).

Read batch by batch; in each, only the caption column is rebuilt (a revised text in place;
a list of captions loses its dropped entries) and rows whose caption went are taken out
with a mask: every other column passes through as Arrow arrays, never as Python values.
The file is read and written by the layout (:mod:`capaudit.io.layouts.parquet`), the writer
with the source's compression. A row's index (``meta.src``) is its row number,
as ``sets add`` (one DuckDB scan) numbers it; a caption list's entries are its turns.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.layouts.parquet import (CAPTION_COLUMNS, ID_COLUMNS, open_file, unreadable,
                                         writer_like)
from capaudit.io.rewrite.base import Changes, Place, Record, Rewriter, own_changes

__all__ = ["ParquetRewriter"]

PENDING_BYTES = 256 << 20   # a source row group past this much Arrow data is written in parts


class ParquetRewriter(Rewriter):
    def __init__(self, *args, caption_col: str | None = None, id_col: str | None = None,
                 caption_candidates=CAPTION_COLUMNS, id_candidates=ID_COLUMNS, **kw):
        super().__init__(*args, **kw)
        # the shard's columns by default: the sharded audit's own (capaudit.io.caption_shards)
        self.file = open_file(self.src, self.path)
        names = self.file.schema_arrow.names
        self.cap = caption_col or next((c for c in caption_candidates if c in names), None)
        if self.cap is None or self.cap not in names:
            raise InputError(f"no caption column (looked for "
                             f"{caption_col or ', '.join(caption_candidates)}; has "
                             f"{', '.join(names[:12])})", path=self.path,
                             fix="name it with --caption-col")
        self.idc = id_col or next((c for c in id_candidates if c in names), None)
        self.writer = None
        self.row = 0
        self.pending: list[pa.RecordBatch] = []   # the current row group's rows, rewritten

    def batches(self) -> Iterator[list[Record]]:
        try:
            for group in range(self.file.num_row_groups):
                for batch in self.file.iter_batches(batch_size=self.batch_records,
                                                    row_groups=[group]):
                    yield self._records(batch)
                self._flush()   # the group's rows written: one row group, as in the source
        except (pa.ArrowException, OSError) as exc:
            raise unreadable(self.path, exc) from None

    def _records(self, batch: pa.RecordBatch) -> list[Record]:
        caps = batch.column(self.cap).to_pylist()
        ids = batch.column(self.idc).to_pylist() if self.idc else [None] * len(caps)
        out = []
        for i, (cap, raw) in enumerate(zip(caps, ids)):
            index = self.row + i
            texts = list(enumerate(cap)) if isinstance(cap, list) else [(None, cap)]
            key = str(index) if raw is None else str(raw)
            places = []
            for turn, text in texts:
                if not isinstance(text, str):
                    raise InputError("caption is missing or not text", path=self.path,
                                     row=index + 1, fix="drop the row or fill its caption")
                places.append(Place(turn, text, key, parse_image_id(raw)))
            out.append(Record(index, places, (batch, i)))
        self.row += batch.num_rows
        return out

    def write(self, records: list[Record], changes: Changes) -> None:
        if not records:
            return
        batch = records[0].raw[0]
        column = batch.column(self.cap).to_pylist()
        keep = [True] * batch.num_rows
        for rec in records:
            i = rec.raw[1]
            self.log.counts["records_in"] += 1
            mine = own_changes(rec, changes)
            if mine:
                column[i] = self._revised(rec, column[i], mine)
                keep[i] = column[i] is not None
            self.log.counts["records_out"] += keep[i]
        col = batch.schema.field(self.cap)
        arrays = [pa.array(column, type=col.type) if name == self.cap else batch.column(n)
                  for n, name in enumerate(batch.schema.names)]
        new = pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
        if not all(keep):
            new = new.filter(pa.array(keep))
        self.pending.append(new)
        if sum(b.nbytes for b in self.pending) >= PENDING_BYTES:
            self._flush()   # a huge row group: written in parts, memory stays bounded

    def _flush(self) -> None:
        """Write the rows kept of one source row group as one row group (none: none)."""
        rows = sum(b.num_rows for b in self.pending)
        if rows:
            self._writer().write_table(pa.Table.from_batches(self.pending),
                                       row_group_size=rows)
        self.pending = []

    def _revised(self, rec: Record, value, mine: dict):
        if not isinstance(value, list):
            self.log.one_caption(rec.index, value, mine[None], field=self.cap)
            return mine[None]
        caps = self.log.revised_list(rec.index, value, mine)
        if not caps:
            self.log.dropped(rec.index, why="every caption dropped")
            return None
        return caps

    def _writer(self):
        if self.writer is None:
            self.writer = writer_like(self.file, self.out)
        return self.writer

    def finish(self) -> None:
        self._flush()
        self._writer().close()

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
