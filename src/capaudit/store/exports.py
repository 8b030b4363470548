"""The queries behind ``sets export``: a set's rows streamed, copied to parquet, grouped by
image, or joined with its latest audit details.

Why here: statements against the store live behind ``store/``; :mod:`capaudit.io.export`
only lays the rows out in each format.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["caption_batches", "copy_to_parquet", "captions_by_image", "latest_audit_run",
           "captions_with_details", "place_rows", "row_chunks"]

CHUNK_ROWS = 16_384


def caption_batches(store, set_id: int, batch_size: int = CHUNK_ROWS, *, meta: bool = False):
    """Arrow batches of ``(row_idx, image_key, image_id, caption[, meta], namespace)`` of the
    set in stored order (each row's ``meta`` JSON text with ``meta``), range by range
    (:func:`row_chunks`: one ``ORDER BY`` over the set sorted every caption in memory)."""
    return row_chunks(store, set_id, "row_idx, image_key, image_id, caption"
                      + (", meta" if meta else "") + ", namespace", batch_size)


def copy_to_parquet(store, set_id: int, path: str | Path) -> None:
    """Write ``(row_idx, image_key, image_id, caption, namespace)`` of the set to a parquet
    file (``sets add`` reads the namespace column back), range by range (a ``COPY`` of the
    set in row order sorted it whole on four threads: 3.2 GB for 1.2M ShareGPT4V captions)."""
    import pyarrow.parquet as pq

    writer = None
    try:
        for batch in caption_batches(store, set_id):
            if writer is None:
                writer = pq.ParquetWriter(str(path), batch.schema, compression="snappy")
            writer.write_batch(batch)
        if writer is None:   # an empty set: the columns, no rows
            empty = store.con.sql("SELECT row_idx, image_key, image_id, caption, namespace "
                                  f"FROM captions WHERE set_id = {int(set_id)} LIMIT 0"
                                  ).to_arrow_table()
            writer = pq.ParquetWriter(str(path), empty.schema, compression="snappy")
    finally:
        if writer is not None:
            writer.close()


def captions_by_image(store, set_id: int) -> list[tuple]:
    """``(image_key, image_id, [captions in row order], namespace)`` per image, in first-row
    order."""
    return store.sql(
        "SELECT image_key, any_value(image_id), list(caption ORDER BY row_idx), "
        "any_value(namespace) FROM captions WHERE set_id = ? GROUP BY image_key "
        "ORDER BY min(row_idx)", [set_id])


def latest_audit_run(store, set_name: str) -> int | None:
    """The newest run that stored per-caption details of the set, None when never audited."""
    return store.one("SELECT max(run_id) FROM caption_details WHERE set_name = ?",
                     [set_name])[0]


def captions_with_details(store, set_id: int, set_name: str, run_id: int | None):
    """Arrow table of ``image_key, image_id, namespace, caption`` in row order, with run
    ``run_id``'s per-caption details (``audit_run_id`` and its columns) joined on when given."""
    if run_id is None:
        return store.con.sql(
            "SELECT image_key, image_id, namespace, caption FROM captions WHERE set_id = ? "
            "ORDER BY row_idx", params=[set_id]).to_arrow_table()
    return store.con.sql(
        "SELECT c.image_key, c.image_id, c.namespace, c.caption, d.run_id AS audit_run_id, "
        "d.* EXCLUDE (run_id, set_name, row_idx, image_id) FROM captions c LEFT JOIN "
        "caption_details d ON d.run_id = ? AND d.set_name = ? AND d.row_idx = c.row_idx "
        "WHERE c.set_id = ? ORDER BY c.row_idx",
        params=[run_id, set_name, set_id]).to_arrow_table()


def row_chunks(store, set_id: int, columns: str, chunk_rows: int = CHUNK_ROWS):
    """``columns`` of a set's rows in row order, as Arrow batches of at most ``chunk_rows``.

    Why ranges of ``row_idx`` and not one ``ORDER BY``: sorting a million long captions holds
    them all; a range is read through DuckDB's zone maps (rows are stored in the order they
    were added), each chunk sorted alone. On a cursor of its own: the caller may write the
    store meanwhile (``filter run SET`` appends the new set while it reads the old one)."""
    top = store.one("SELECT max(row_idx) FROM captions WHERE set_id = ?", [int(set_id)])[0]
    if top is None:
        return
    cur = store.con.cursor()
    try:
        for start in range(0, int(top) + 1, chunk_rows):
            yield from cur.sql(
                f"SELECT {columns} FROM captions WHERE set_id = $sid AND row_idx >= $a AND "
                f"row_idx < $b ORDER BY row_idx",
                params={"sid": int(set_id), "a": start, "b": start + chunk_rows}
            ).to_arrow_table().to_batches()
    finally:
        cur.close()


def place_rows(store, set_id: int, chunk_rows: int = CHUNK_ROWS):
    """``(row_idx, src, turn, caption)`` of a set in row order (:func:`row_chunks`); ``src``
    and ``turn``: the row's ``meta.src`` / ``meta.turn`` (or ``sent``) as integers, NULL when
    absent."""
    yield from row_chunks(
        store, set_id, "row_idx, TRY_CAST(json_extract_string(meta, '$.src') AS BIGINT) AS "
        "src, TRY_CAST(coalesce(json_extract_string(meta, '$.turn'), json_extract_string("
        "meta, '$.sent')) AS INTEGER) AS turn, caption", chunk_rows)
