"""The filters' one engine: captions in, in bounded batches; decisions, log rows and counts out.

Why one: a registered set (``filter run SET``), a sharded corpus (``filter run --shards``) and
``review import`` all score, decide and log the same way; each used to build the whole output
and log in memory (tens of KB per ShareGPT4V-length caption: 3.4 GB for 100k captions). Here
a filter's :meth:`~capaudit.filters.base.Filter.apply` is drained ``batch`` results at a
time (datatrove's steps: a generator in, a generator out); each batch comes with its log rows
as an Arrow table, and the counts add up in one :class:`~capaudit.filters.base.FilterSummary`.
What a caller keeps is its own business: the store appends each batch inside its
transaction, a shard task hands it to the format writer and the shard's log file.

The log's columns (:data:`LOG_SCHEMA`) are those of the store's ``filter_log`` table; a
sharded run's log adds its place columns (:data:`SHARD_LOG_SCHEMA`: shard, source record,
turn), so a parquet file of it reads like the table.
"""

from __future__ import annotations

from array import array
from itertools import islice
from typing import Callable, Iterable, Iterator

import pyarrow as pa

from capaudit.core.arrays import from_list
from capaudit.filters.base import CaptionDoc, CaptionResult, Filter, FilterSummary

__all__ = ["LOG_SCHEMA", "SHARD_LOG_SCHEMA", "LogColumns", "FilteredBatch", "filter_batches",
           "finish", "BATCH_CAPTIONS", "DistinctIds"]

BATCH_CAPTIONS = 1024   # captions per batch: ~1 MB of ShareGPT4V-length text, ~20 MB as results

LOG_SCHEMA = pa.schema([("set_name", pa.string()), ("filter", pa.string()),
                        ("run_id", pa.int32()), ("row_idx", pa.int64()),
                        ("new_row_idx", pa.int64()), ("image_id", pa.int64()),
                        ("sentence_idx", pa.int32()), ("action", pa.string()),
                        ("reason", pa.string()), ("original", pa.string()),
                        ("revised", pa.string()), ("critique", pa.string()),
                        ("score", pa.float64())])
# a shard's log: the table's columns, then where each caption sits in its shard
SHARD_LOG_SCHEMA = LOG_SCHEMA.append(pa.field("shard", pa.string())) \
    .append(pa.field("record", pa.int64())).append(pa.field("turn", pa.int32()))


class LogColumns:
    """Log rows of one batch, column by column (one row per input sentence)."""

    NAMES = [f.name for f in LOG_SCHEMA]

    def __init__(self):
        self.cols: dict[str, list] = {k: [] for k in self.NAMES}

    def add(self, filter_name: str, res: CaptionResult, new_row: int | None) -> None:
        doc, cols = res.doc, self.cols
        sents = doc.sentences
        for d in res.decisions:
            cols["filter"].append(filter_name)
            cols["row_idx"].append(doc.row_idx)
            cols["new_row_idx"].append(new_row)
            cols["image_id"].append(doc.image_id)
            cols["sentence_idx"].append(d.sentence_idx)
            cols["action"].append(d.action)
            cols["reason"].append(d.reason or None)
            cols["original"].append(sents[d.sentence_idx])
            cols["revised"].append(d.revised)
            cols["critique"].append(d.critique)
            cols["score"].append(None if d.score is None else float(d.score))

    def table(self, set_name: str | None, run_id: int | None,
              extra: dict[str, list] | None = None) -> pa.Table:
        """The rows as :data:`LOG_SCHEMA` (or :data:`SHARD_LOG_SCHEMA` with ``extra``)."""
        n = len(self.cols["row_idx"])
        cols = {**self.cols, "set_name": [set_name] * n, "run_id": [run_id] * n,
                **(extra or {})}
        schema = SHARD_LOG_SCHEMA if extra else LOG_SCHEMA
        # through the buffers: pa.array on a list imports pandas (~0.3 CPU-s per process)
        return pa.Table.from_arrays([from_list(cols[f.name], f.type) for f in schema],
                                    schema=schema)


class FilteredBatch:
    """One batch of results: each caption's result, its output row (None: it left the set),
    and the batch's log rows."""

    def __init__(self, results: list[CaptionResult], new_rows: list[int | None],
                 log: LogColumns):
        self.results, self.new_rows, self.log = results, new_rows, log


def _checked(filt: Filter, res: CaptionResult) -> CaptionResult:
    if len(res.decisions) != len(res.doc.spans):
        raise AssertionError(f"filter {filt.name} decided {len(res.decisions)} sentences of "
                             f"row {res.doc.row_idx}, which has {len(res.doc.spans)}")
    return res


def filter_batches(filt: Filter, docs: Iterable[CaptionDoc], summary: FilterSummary, *,
                   batch: int = BATCH_CAPTIONS, first_new_row: int = 0,
                   tick: Callable[[int], None] | None = None,
                   last: bool = True) -> Iterator[FilteredBatch]:
    """Drain ``filt.apply(docs)`` in batches of ``batch`` results (the filter is set up by
    the caller); every result is counted in ``summary``. Output rows are numbered from
    ``first_new_row`` in input order. When the stream ends (``last``; a caller feeding one
    stream in several calls passes False and calls :func:`finish` once), :func:`finish`."""
    new_row = first_new_row
    stream = filt.apply(docs)
    while results := list(islice(stream, batch)):
        rows: list[int | None] = []
        log = LogColumns()
        for res in results:
            summary.add(_checked(filt, res))
            rows.append(new_row if res.kept else None)
            new_row += res.kept
            log.add(filt.name, res, rows[-1])
        yield FilteredBatch(results, rows, log)
        if tick is not None:
            tick(len(results))
    if last:
        finish(filt, summary)


def finish(filt: Filter, summary: FilterSummary) -> None:
    """The stream has ended: the filter's set-level report goes into ``summary.extra`` and
    the sentence invariant is checked."""
    summary.extra.update(getattr(filt, "report", {}) or {})
    if getattr(filt, "chosen", None):   # why an option holds a value no one gave
        summary.extra["chosen"] = dict(filt.chosen)
    summary.check()


class DistinctIds:
    """A count of distinct image ids in ~8 bytes per id (a Python ``set`` of a million ids
    holds ~60 MB; a filter's report counts the images it saw and those it judged).
    ``add`` and ``len`` as a set; ids are kept in an array and deduplicated as it fills."""

    def __init__(self, compact_at: int = 1 << 20):
        self._ids = array("q")
        self._compact_at = compact_at

    def add(self, iid: int) -> None:
        self._ids.append(iid)
        if len(self._ids) >= self._compact_at:
            self._compact()

    def _compact(self) -> None:
        import numpy as np

        unique = np.unique(np.frombuffer(self._ids, np.int64))
        self._ids = array("q", unique.tobytes())
        self._compact_at = max(self._compact_at, 2 * len(self._ids))

    def __len__(self) -> int:
        self._compact()
        return len(self._ids)
