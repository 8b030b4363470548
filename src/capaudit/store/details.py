"""Per-caption audit details: the ``caption_details`` table, written chunk by chunk.

The table has fixed core columns (see :mod:`capaudit.store.schema`); each
metric declares its own per-caption columns in its spec (``Metric.details``),
and they are added to the table the first time a run writes them, so a new
metric's details are queryable with no DDL edit. Rows are inserted by column
name; columns a run does not produce stay NULL.
"""

from __future__ import annotations

import pyarrow as pa

from capaudit.store.schema import DETAIL_RENAMES, add_columns

__all__ = ["write_details", "write_details_file"]


def write_details(store, run_id: int, set_name: str, details: pa.Table) -> None:
    """Insert a details table (all captions, or one streamed chunk) for ``run_id`` / ``set_name``.

    The caller holds the transaction.
    """
    if details.num_rows == 0:
        return
    cols = {DETAIL_RENAMES.get(n, n): details.column(n) for n in details.column_names}
    if "gender_pred" in cols:  # dictionary -> plain strings
        cols["gender_pred"] = cols["gender_pred"].cast(pa.string())
    tbl = pa.table(cols)
    add_columns(store.con, "caption_details", tbl.schema)
    names = ", ".join(f'"{n}"' for n in tbl.column_names)
    store.con.register("_details", tbl)
    try:
        store.con.execute(f"INSERT INTO caption_details (run_id, set_name, {names}) "
                          f"SELECT ?, ?, {names} FROM _details", [run_id, set_name])
    finally:
        store.con.unregister("_details")


def write_details_file(store, run_id: int, set_name: str, path, shift: int = 0) -> int:
    """Insert a parquet file of details tables (a shard's, :mod:`capaudit.audit.shard_outputs`)
    for ``run_id`` / ``set_name``, ``caption_index + shift`` as the row index; DuckDB reads it
    streaming. The caller holds the transaction. Returns the rows inserted."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    fields = [pa.field(DETAIL_RENAMES.get(f.name, f.name),
                       pa.string() if pa.types.is_dictionary(f.type) else f.type) for f in schema]
    add_columns(store.con, "caption_details", pa.schema(fields))
    names = ", ".join(f'"{f.name}"' for f in fields)
    src = ", ".join(f'"{n}" + ?' if n == "caption_index" else f'"{n}"' for n in schema.names)
    store.con.execute(f"INSERT INTO caption_details (run_id, set_name, {names}) "
                      f"SELECT ?, ?, {src} FROM read_parquet(?)",
                      [run_id, set_name, int(shift), str(path)])
    return pq.ParquetFile(path).metadata.num_rows
