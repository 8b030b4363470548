"""``ResultTable``: the rows of one result, as the Python API returns them.

A plain container (column names, row tuples, the run that stored them) that
converts to Arrow, pandas or JSON on demand; :mod:`capaudit.api` builds one for
each audit, disparity and comparison. Import-light: pyarrow and pandas load
only when a conversion asks for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

__all__ = ["ResultTable", "RESULT_COLUMNS", "metric_rows", "audit_table", "disparity_rows"]

# n_images: what the value rests on; status: ok, partial, too-few, ... (metrics.present)
RESULT_COLUMNS = ("set", "metric", "group", "value", "n", "ci_low", "ci_high", "n_images",
                  "status")


@dataclass
class ResultTable:
    """Rows of one result: ``columns`` and ``rows`` (tuples), convertible to Arrow,
    pandas and JSON.

    >>> t = ResultTable(("set", "value"), [("nic", 0.5)])
    >>> t.to_json()
    '[{"set": "nic", "value": 0.5}]'
    >>> len(t), t.to_arrow().num_rows
    (1, 1)
    """

    columns: tuple[str, ...]
    rows: list[tuple]
    run_id: int | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (dict(zip(self.columns, r)) for r in self.rows)

    def to_arrow(self):
        """A ``pyarrow.Table`` (column types inferred from the values)."""
        import pyarrow as pa

        return pa.table({c: [r[i] for r in self.rows] for i, c in enumerate(self.columns)})

    def to_pandas(self):
        """A ``pandas.DataFrame`` (pandas is a core dependency: the README's API snippet calls
        this after the plain install)."""
        return self.to_arrow().to_pandas()

    def to_json(self, indent: int | None = None) -> str:
        """The rows as a JSON list of objects."""
        return json.dumps(list(self), indent=indent, default=str)

    def __repr__(self) -> str:
        return f"ResultTable({len(self.rows)} rows: {', '.join(self.columns)})"


def metric_rows(name: str, results: Mapping[str, Any], group: str = "all") -> list[tuple]:
    """One row per metric result of set ``name`` (:data:`RESULT_COLUMNS`)."""
    return [(name, m, group, r.value, r.n, r.ci_low, r.ci_high, r.n_images, r.state)
            for m, r in results.items()]


def audit_table(results: Mapping[str, Any], run_id: int | None) -> ResultTable:
    """The rows of an audit's ``{set: AuditResult}`` (``_``-keys skipped)."""
    rows = [row for name, res in results.items() if not name.startswith("_")
            for row in metric_rows(name, res.results)]
    return ResultTable(RESULT_COLUMNS, rows, run_id)


def disparity_rows(name: str, d) -> list[tuple]:
    """The rows of one disparity result: each group, and the gap (group ``by:a-b``)."""
    rows = []
    for metric, per in d.results.items():
        for g, r in per.items():
            grp = f"{d.by}:{g}" if g == d.diff_key else f"{d.by}={g}"
            rows.append((name, metric, grp, r.value, r.n, r.ci_low, r.ci_high, r.n_images,
                         r.state))
    return rows
