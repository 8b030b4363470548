"""Reading stored metric rows (the SQL other packages used to send themselves)."""

from __future__ import annotations

__all__ = ["latest_metrics"]


def latest_metrics(store, set_name: str) -> list[tuple]:
    """``(metric, value, n, ci_low, ci_high)`` of the latest run of every metric of a set
    (group 'all'), amplification rows left out, sorted by metric."""
    return store.sql(
        "SELECT metric, value, n, ci_low, ci_high FROM metrics m WHERE set_name = ? "
        "AND grp = 'all' AND metric NOT LIKE 'amplification.%' AND run_id = ("
        "SELECT max(run_id) FROM metrics WHERE set_name = m.set_name AND metric = m.metric "
        "AND grp = 'all') ORDER BY metric", [set_name])
