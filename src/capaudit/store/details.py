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

__all__ = ["write_details", "write_details_file", "file_score_agreement"]


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


def file_score_agreement(store, run_id: int, set_name: str, set_id: int | None,
                         field: str = "CHAIRs", theirs: list | None = None
                         ) -> tuple[int, int, list[int]]:
    """How run ``run_id``'s per-caption CHAIR_s agrees with the file's own (each caption's
    ``meta.chair.<field>``, :mod:`capaudit.io.readers.chair`): ``(captions both scored,
    captions judged otherwise, the first few of those rows)``. ``theirs``: a file audited
    as a file (no stored captions): its captions' own scores in row order."""
    if theirs is None:
        rows = store.sql(
            "SELECT c.row_idx, d.chair_s, TRY_CAST(json_extract_string(c.meta, '$.chair.' || ?) "
            "AS DOUBLE) AS theirs FROM captions c JOIN caption_details d ON d.run_id = ? AND "
            "d.set_name = ? AND d.row_idx = c.row_idx WHERE c.set_id = ? AND d.chair_s IS NOT "
            "NULL ORDER BY c.row_idx", [field, run_id, set_name, set_id])
    else:
        rows = [(row, ours, theirs[row] if row < len(theirs) else None) for row, ours in
                store.sql("SELECT row_idx, chair_s FROM caption_details WHERE run_id = ? AND "
                          "set_name = ? AND chair_s IS NOT NULL ORDER BY row_idx",
                          [run_id, set_name])]
    scored = [(row, ours, theirs > 0) for row, ours, theirs in rows if theirs is not None]
    differ = [row for row, ours, theirs in scored if bool(ours) != theirs]
    return len(scored), len(differ), differ[:5]
