"""Reading stored annotation rows (the SQL the filters and the annotation loader share)."""

from __future__ import annotations

__all__ = ["source_rows"]

# the grouped annotation tables and their value column
_TABLES = {"instance_categories": "category", "chair_gt": "object"}


def source_rows(store, table: str, col: str, source: str) -> list[tuple]:
    """``(image_id, value)`` rows of one annotation source in ``instance_categories``
    (category) or ``chair_gt`` (object)."""
    if _TABLES.get(table) != col:
        raise ValueError(f"not an annotation table/column: {table}.{col}")
    return store.sql(f"SELECT image_id, {col} FROM {table} WHERE source = ?", [source])
