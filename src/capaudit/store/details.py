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
from capaudit.store.arrow_scan import ARROW, execute_on

__all__ = ["write_details", "write_details_file"]


def write_details(store, run_id: int, set_name: str, details: pa.Table) -> None:
    """Insert a details table (all captions, or one streamed chunk) for ``run_id`` / ``set_name``.

    The caller holds the transaction.
    """
    if details.num_rows == 0:
        return
    tbl = pa.table({DETAIL_RENAMES.get(n, n): details.column(n) for n in details.column_names})
    # dictionary columns (the predicted gender) are stored as plain strings: DuckDB casts
    # them (pyarrow's cast would import pyarrow.compute, ~0.05 s of a small audit)
    text = {f.name for f in tbl.schema if pa.types.is_dictionary(f.type)}
    add_columns(store.con, "caption_details", stored_schema(details.schema))
    names = ", ".join(f'"{n}"' for n in tbl.column_names)
    values = ", ".join(f'CAST("{n}" AS VARCHAR)' if n in text else f'"{n}"' for n in tbl.column_names)
    execute_on(store.con, f"INSERT INTO caption_details (run_id, set_name, {names}) "
                          f"SELECT ?, ?, {values} FROM {ARROW}", tbl, [run_id, set_name])


def write_details_file(store, run_id: int, set_name: str, path, shift: int = 0) -> int:
    """Insert a parquet file of details tables (a shard's, :mod:`capaudit.audit.shards.outputs`)
    for ``run_id`` / ``set_name``, ``caption_index + shift`` as the row index; DuckDB reads it
    streaming. The caller holds the transaction. Returns the rows inserted."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    stored = stored_schema(schema)
    add_columns(store.con, "caption_details", stored)
    names = ", ".join(f'"{n}"' for n in stored.names)
    src = ", ".join(f'"{n}" + ?' if n == "caption_index" else f'"{n}"' for n in schema.names)
    store.con.execute(f"INSERT INTO caption_details (run_id, set_name, {names}) "
                      f"SELECT ?, ?, {src} FROM read_parquet(?)",
                      [run_id, set_name, int(shift), str(path)])
    return pq.ParquetFile(path).metadata.num_rows


def stored_schema(schema: pa.Schema) -> pa.Schema:
    """The ``caption_details`` columns a details schema lands in: engine names renamed
    (:data:`DETAIL_RENAMES`), dictionary columns as their plain value type."""
    return pa.schema([pa.field(DETAIL_RENAMES.get(f.name, f.name),
                               f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                      for f in schema])
