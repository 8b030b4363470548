"""Read-only summaries of a stored caption set (the SQL behind ``sets show``).

Why here: statements against the store live behind ``store/``; the CLI formats what these
functions return.
"""

from __future__ import annotations

__all__ = ["set_stats", "sample_captions"]


def set_stats(store, set_id: int) -> tuple[int, int, int, float | None]:
    """``(rows, distinct image keys, rows with an integer id, mean caption length)``."""
    return store.one("SELECT count(*), count(DISTINCT image_key), count(image_id), "
                     "avg(length(caption)) FROM captions WHERE set_id = ?", [set_id])


def sample_captions(store, set_id: int, n: int) -> list[tuple[str, str]]:
    """The first ``n`` ``(image_key, caption)`` rows in stored order."""
    return store.sql("SELECT image_key, caption FROM captions WHERE set_id = ? "
                     "ORDER BY row_idx LIMIT ?", [set_id, n])
