"""Runs and their metric rows: the bookkeeping of every command that records results.

:class:`RunLog` is the part of :class:`~capaudit.store.db.Store` that starts,
finishes and discards runs, marks the runs of killed processes, and writes
metric rows; it runs on the store's connection (``self.con``, ``self.one``,
``self.sql``). :func:`jsonable` turns the values put in JSON columns (numpy
scalars and arrays, sets) into plain JSON.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from typing import Mapping

from capaudit.core.redact import redact, redact_values
from capaudit.core.runs import process_alive

__all__ = ["RunLog", "jsonable"]


class RunLog:
    """Run and metric-row methods of :class:`~capaudit.store.db.Store` (a mixin over its
    connection)."""

    def start_run(self, command: str, config: Mapping, seed: int | None, versions: Mapping) -> int:
        """Record a 'running' run (with this pid and host); earlier orphans become 'killed'."""
        self.mark_orphaned_runs()
        run_id = self.one("SELECT nextval('run_id_seq')")[0]
        self.con.execute(
            "INSERT INTO runs (run_id, command, config, seed, versions, started_at, ended_at, "
            "status, pid, host) VALUES (?, ?, ?, ?, ?, ?, NULL, 'running', ?, ?)",
            [run_id, redact(command), json.dumps(redact_values(dict(config)), default=str), seed,
             json.dumps(dict(versions)), _dt.datetime.now(), os.getpid(), socket.gethostname()])
        return run_id

    def finish_run(self, run_id: int, status: str = "ok") -> None:
        self.con.execute("UPDATE runs SET ended_at = ?, status = ? WHERE run_id = ?",
                         [_dt.datetime.now(), status, run_id])

    def discard_run(self, run_id: int) -> None:
        """Forget a run the command rejected (bad input, nothing written): no 'failed' row."""
        self.con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])

    def mark_orphaned_runs(self) -> int:
        """Mark 'running' runs of this host whose process is gone as 'killed'; returns how many.

        A run killed with SIGKILL (or a lost machine) cannot record its own end;
        the next process that records a run does, for the runs it can check
        (same host, pid no longer alive). ``ended_at`` stays empty.
        """
        rows = self.sql("SELECT run_id, pid FROM runs WHERE status = 'running' AND pid IS NOT "
                        "NULL AND host = ?", [socket.gethostname()])
        # a pid equal to ours is a reused one: this process has not started that run
        dead = [run_id for run_id, pid in rows if pid == os.getpid() or not process_alive(pid)]
        for run_id in dead:
            self.con.execute("UPDATE runs SET status = 'killed' WHERE run_id = ?", [run_id])
        return len(dead)

    def write_metric(self, run_id: int, set_name: str, metric: str, value, n, ci_low=None,
                     ci_high=None, grp: str = "all", extra: Mapping | None = None) -> None:
        from capaudit.store.schema import METRIC_COLUMNS

        extra = dict(extra or {})
        images = extra.get("n_images")
        self.con.execute(f"INSERT INTO metrics ({', '.join(METRIC_COLUMNS)}) VALUES "
                         f"({', '.join('?' * len(METRIC_COLUMNS))})",
                         [run_id, set_name, metric, grp, value, n, ci_low, ci_high,
                          json.dumps(extra, default=jsonable),
                          int(images) if isinstance(images, (int, float)) else None,
                          extra.get("status") if isinstance(extra.get("status"), str) else None])


def jsonable(obj):
    """``default=`` of the store's ``json.dumps``: numpy values as Python ones, sets sorted,
    anything else as its ``str``."""
    try:
        import numpy as np
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    return str(obj)
