"""Parquet files: the layout's one reader of record batches and one writer.

Reading: :func:`record_batches` gives a shard's batches of the columns asked for, from a local
file or an open stream (pyarrow, row group by row group), or from a remote file by its URL
(footer first, then only those columns' byte ranges:
:mod:`capaudit.core.storage.remote_parquet`): ``audit run --shards`` reads so.
:func:`open_file` opens one whole for ``filter run --shards`` and ``sets export --to original``
(:class:`~capaudit.io.rewrite.parquet.ParquetRewriter`, which reads every column, row group
by row group). A file pyarrow cannot read is one :func:`unreadable` line naming it. ``sets
add`` reads parquet through DuckDB (:mod:`capaudit.io.readers.tabular`: SQL over the file,
``--where``), the one reader of the layout that is not here.

Writing: :func:`writer_like` writes a file with a source's schema and compression (the
rewriter), :func:`table_bytes` one table whole (an image shard's index).
"""

from __future__ import annotations

from typing import Callable, Iterator

import pyarrow as pa

from capaudit.errors import InputError

__all__ = ["record_batches", "open_file", "unreadable", "writer_like", "table_bytes",
           "CAPTION_COLUMNS", "ID_COLUMNS"]

# the columns a shard keeps its caption and id in (img2dataset, DataComp, HF datasets)
CAPTION_COLUMNS = ("caption", "text", "TEXT", "alt_text", "captions")
ID_COLUMNS = ("image_id", "key", "uid", "id", "image")


def unreadable(path, exc: BaseException, kind: str = "parquet") -> InputError:
    """The one line for a shard of ``kind`` that pyarrow cannot read."""
    return InputError(f"not a readable {kind} shard ({str(exc).splitlines()[0]})", path=path,
                      fix="rewrite the shard or pass --skip-bad-shards")


def open_file(source, path):
    """``source`` (a path or an open binary file) as a ``pyarrow.parquet.ParquetFile``."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(source)
    except (pa.ArrowException, OSError) as exc:
        raise unreadable(path, exc) from None


def record_batches(source, choose: Callable[[list[str]], list[str]], batch_size: int,
                   options: dict | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of the columns ``choose(schema names)`` picks; ``source``: a local path or an
    open file (read by pyarrow), or a remote file's URL as text (read by byte ranges)."""
    import pyarrow.parquet as pq

    if isinstance(source, str):
        from capaudit.core.storage.remote_parquet import iter_remote_parquet

        yield from iter_remote_parquet(source, choose, batch_size, options)
        return
    pf = pq.ParquetFile(source, pre_buffer=False)
    yield from pf.iter_batches(batch_size=batch_size, columns=choose(pf.schema_arrow.names))


def writer_like(pf, out):
    """A ``ParquetWriter`` to ``out`` with the schema and compression of the open source
    ``pf`` (its first column chunk's codec; snappy for a file without one)."""
    import pyarrow.parquet as pq

    meta = pf.metadata
    codec = meta.row_group(0).column(0).compression if meta.num_row_groups and \
        meta.num_columns else "snappy"
    return pq.ParquetWriter(out, pf.schema_arrow,
                            compression=codec.lower() if codec != "UNCOMPRESSED" else "none")


def table_bytes(table: pa.Table) -> bytes:
    """``table`` as one parquet file's bytes (pyarrow's defaults)."""
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()
