"""``capaudit filter run --shards SRC --out DST``: the thin CLI over
:func:`capaudit.filters.shards.run.run_sharded_filter`.

A progress bar counts shard tasks (of every pass: the coverage pass, then the filter pass),
then the run's summary is printed as ``filter run SET``'s is, with a line on the shards
(filtered, resumed, failed with their one-line reason) and where the cleaned shards, logs and
summary are.
"""

from __future__ import annotations

import time
from pathlib import Path

from capaudit.cli.common import ShardProgress, console, open_store, print_skipped


def run_shards(shards: str, out: str, filter_name: str, given: dict, *, config, seed: int,
               overrides, executor: str, workers: int, address: str | None,
               work_dir: str | None, skip_bad: bool, keep_work: bool, fmt: str | None,
               reader: dict, db: Path | None) -> None:
    from capaudit.cli.filter_summary import _print_summary
    from capaudit.filters.shards.plan import log_dir, summary_path
    from capaudit.filters.shards.run import run_sharded_filter
    from capaudit.core.storage.paths import absolute
    from capaudit.core.storage.urls import shown_url

    store = open_store(db, create=True)
    t0 = time.perf_counter()
    with ShardProgress("filtering shards", "captions_in") as bar:
        summary, cov, shown_shards = run_sharded_filter(
            store, shards, out, filter_name, given, config=config, seed=seed,
            overrides=overrides, executor=executor, workers=workers, address=address,
            work_dir=str(work_dir) if work_dir else None, skip_bad=skip_bad, fmt=fmt,
            reader=reader, keep_work=keep_work, on_start=bar.start, on_shard=bar.shard)
    wall = time.perf_counter() - t0
    if cov is not None:     # the first pass's guard (the hallucination filter's coverage)
        console.print(cov.line())
    out = shown_url(out)
    _print_summary(summary, out, shown_shards)
    s, rec = summary["shards"], summary.get("records") or {}
    console.print(f"{s['total']} shards: {s['filtered']} filtered, {s['resumed']} resumed, "
                  f"{len(s['failed'])} failed; records {rec.get('records_in', 0):,} in, "
                  f"{rec.get('records_out', 0):,} out ({rec.get('records_dropped', 0):,} "
                  f"dropped whole: every caption gone, a tar sample with its image); "
                  f"{summary.get('captions_in', 0):,} captions in {wall:.1f} s")
    print_skipped(s["failed"])
    full = absolute(out)
    console.print(f"cleaned shards: {out}; logs: {log_dir(full)}; "
                  f"summary: {summary_path(full)}")
