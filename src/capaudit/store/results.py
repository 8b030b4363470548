"""Reading stored metric rows (the SQL other packages used to send themselves)."""

from __future__ import annotations

__all__ = ["latest_metrics", "mark_compare_basis"]


# rows of a compare scored on part of a set (shared images, a parent's images) carry
# extra.basis: they describe that part, never the whole set
_WHOLE_SET = "coalesce(json_extract_string(extra, '$.basis'), '') = ''"


def latest_metrics(store, set_name: str) -> list[tuple]:
    """``(metric, value, n, ci_low, ci_high)`` of the latest run of every metric of a set
    (group 'all', scored on the whole set), amplification rows left out, sorted by metric."""
    return store.sql(
        "SELECT metric, value, n, ci_low, ci_high FROM metrics m WHERE set_name = ? "
        f"AND grp = 'all' AND metric NOT LIKE 'amplification.%' AND {_WHOLE_SET} "
        "AND run_id = (SELECT max(run_id) FROM metrics WHERE set_name = m.set_name "
        f"AND metric = m.metric AND grp = 'all' AND {_WHOLE_SET}) ORDER BY metric", [set_name])


def mark_compare_basis(store, run_id: int, set_name: str, basis: str) -> None:
    """Label a compare's rows of a set scored on part of it (``basis`` says which part)."""
    import json

    store.sql("UPDATE metrics SET extra = json_merge_patch(coalesce(extra, '{}'), ?) "
              "WHERE run_id = ? AND set_name = ? AND grp = 'all'",
              [json.dumps({"basis": basis}), run_id, set_name])
