"""A remote parquet file read footer first, then only the byte ranges of the needed columns.

Why: a DataComp or LAION metadata shard has some 30 columns and a caption audit needs two.
Reading it through a plain buffered file fetches blocks around every column; here the
footer is read once (one small range request), the columns are chosen from its schema, and
the row groups are read in windows of at most :data:`WINDOW_BYTES` of those columns'
compressed bytes: each window is one ``fsspec.parquet.open_parquet_file`` call, which
fetches exactly the column chunks' ranges (neighbours merged) into memory and serves
pyarrow from them. Memory stays bounded by a window, whatever the file's size; a transient
fault re-fetches the window (:func:`capaudit.core.storage.fs.retrying`).
"""

from __future__ import annotations

from typing import Callable, Iterator

import pyarrow as pa

from capaudit.core.storage.fs import filesystem, open_input, retrying

__all__ = ["iter_remote_parquet", "WINDOW_BYTES"]

WINDOW_BYTES = 64 << 20


def _windows(meta, columns: list[int]) -> list[list[int]]:
    """Row groups in runs whose needed compressed bytes stay under :data:`WINDOW_BYTES`."""
    out, size = [[]], 0
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        n = sum(group.column(c).total_compressed_size for c in columns)
        if out[-1] and size + n > WINDOW_BYTES:
            out.append([])
            size = 0
        out[-1].append(rg)
        size += n
    return [w for w in out if w]


def iter_remote_parquet(url: str, choose: Callable[[list[str]], list[str]], batch_size: int,
                        storage_options: dict | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches of the columns ``choose(schema names)`` picks, window by window."""
    import fsspec.parquet
    import pyarrow.parquet as pq

    with open_input(url, storage_options) as fh:
        meta = pq.read_metadata(fh)
    names = meta.schema.to_arrow_schema().names
    wanted = choose(names)
    leaves = [i for i in range(meta.num_columns)
              if meta.schema.column(i).path.split(".")[0] in wanted]
    fs, path = filesystem(url, storage_options)
    footer = max(meta.serialized_size + 8, 64 << 10)   # pyarrow reads the last 64 KiB first
    for window in _windows(meta, leaves):
        f = retrying(lambda: fsspec.parquet.open_parquet_file(
            path, fs=fs, columns=wanted, row_groups=window, engine="pyarrow",
            footer_sample_size=footer), url)
        with f:
            yield from pq.ParquetFile(f).iter_batches(batch_size=batch_size, columns=wanted,
                                                      row_groups=window)
