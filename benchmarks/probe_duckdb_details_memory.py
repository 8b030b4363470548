"""Peak RSS of DuckDB alone while it takes per-caption detail rows.

    python benchmarks/probe_duckdb_details_memory.py MODE ROWS

Why: ``capaudit audit run`` with details grows by a few hundred bytes per caption
while the engine fed without a store is flat (``bench_memory.py``). This probe
isolates DuckDB: it inserts ROWS detail-like rows (ids, a count, a VARCHAR[] of
mentions, a double) in 50k-row chunks into a fresh file and prints the process's
peak RSS. MODE is a combination of words:

- ``base``: one transaction for all chunks (what the audit does: nothing stored half);
- ``commit``: a commit after every chunk; ``ckpt`` (with commit): a CHECKPOINT too;
- ``lim``: ``memory_limit='32MB'`` (what ``audit run`` sets, ``Store.bounded_cache``: the
  written blocks are evicted; 200 MB did not bind at 800k rows); ``thr``: one thread;
  ``pio``: no insertion order.

Compare two ROWS values per mode: the difference over the row difference is
DuckDB's own memory per row.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile

import duckdb
import numpy as np
import pyarrow as pa


def main() -> None:
    mode, n_rows = sys.argv[1], int(sys.argv[2])
    path = os.path.join(tempfile.mkdtemp(), "probe.duckdb")
    con = duckdb.connect(path)
    if "lim" in mode:
        con.execute("SET memory_limit='32MB'")
    if "thr" in mode:
        con.execute("SET threads=1")
    if "pio" in mode:
        con.execute("SET preserve_insertion_order=false")
    con.execute("CREATE TABLE d(run_id INT, set_name VARCHAR, row_idx BIGINT, image_id BIGINT, "
                "n_tokens INT, mentioned VARCHAR[], recall DOUBLE)")
    con.execute("BEGIN")
    rng, chunk = np.random.default_rng(0), 50_000
    for s in range(0, n_rows, chunk):
        n = min(chunk, n_rows - s)
        t = pa.table({"row_idx": np.arange(s, s + n), "image_id": rng.integers(0, 500_000, n),
                      "n_tokens": rng.integers(5, 30, n).astype(np.int32),
                      "mentioned": pa.array([["dog", "cat"] if i % 3 else [] for i in range(n)]),
                      "recall": rng.random(n)})
        con.register("_t", t)
        con.execute("INSERT INTO d SELECT 1, 'x', row_idx, image_id, n_tokens, mentioned, recall "
                    "FROM _t")
        con.unregister("_t")
        if "commit" in mode:
            con.execute("COMMIT")
            if "ckpt" in mode:
                con.execute("CHECKPOINT")
            con.execute("BEGIN")
    con.execute("COMMIT")
    print(f"{mode} {n_rows:,} rows: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")


if __name__ == "__main__":
    main()
