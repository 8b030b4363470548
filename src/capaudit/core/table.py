"""``ResultTable``: the rows of one result, as the Python API returns them.

A plain container (column names, row tuples, the run that stored them) that
converts to Arrow, pandas or JSON on demand; :mod:`capaudit.api` builds one for
each audit, disparity and comparison. Import-light: pyarrow and pandas load
only when a conversion asks for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["ResultTable"]


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
