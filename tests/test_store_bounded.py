"""Set-level statements inside a bulk write (#31, found at 1.2M captions).

``filter run SET`` writes its output set inside :meth:`Store.bulk_transaction`, whose
buffer pool is bounded at 32 MB; the set's finalisation then joins every new row to its
parent's rows for their namespace. At 200,000 rows that UPDATE failed with DuckDB's
out-of-memory error (a traceback, nothing stored); 1.2M ShareGPT4V captions could not be
filtered on the registered-set path at all."""

from __future__ import annotations

import pyarrow as pa

from capaudit.store.db import Store

N = 200_000


def _rows(n: int) -> pa.Table:
    return pa.table({"image_key": [f"COCO_val2014_{i:012d}.jpg" for i in range(n)],
                     "image_id": list(range(n)), "caption": ["a dog on a bench."] * n})


def _limit(store: Store) -> str:
    return store.one("SELECT current_setting('memory_limit')")[0]


def test_a_derived_set_of_many_rows_is_finalised_inside_the_write_bound(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    default = _limit(store)
    with store.bulk_transaction():
        parent = store.create_set("p", source_path="p.jsonl", format="jsonl", sha256=None)
        store.append_captions(parent, _rows(N), 0)
        store.con.execute("UPDATE captions SET namespace = 'coco2014' WHERE set_id = ?",
                          [parent])
        store.finalize_set(parent)
    with store.bulk_transaction():
        bound = _limit(store)
        child = store.create_set("c", source_path="filter:x", format="filter", sha256=None,
                                 parent="p")
        store.append_captions(child, _rows(N), 0)
        store.finalize_set(child)
        assert _limit(store) == bound          # the write bound is back for what follows
    assert _limit(store) == default            # and the default after the transaction
    info = store.get_set("c")
    assert (info.n_captions, info.n_images) == (N, N)
    # every row took its parent's namespace (same image key), so the set's is that one
    assert store.one("SELECT count(*) FROM captions c JOIN caption_sets s USING (set_id) "
                     "WHERE s.name = 'c' AND c.namespace = 'coco2014'")[0] == N
    assert store.one("SELECT namespace FROM caption_sets WHERE name = 'c'")[0] == "coco2014"


def test_duckdb_out_of_memory_is_one_line_and_stores_nothing(tmp_path, capsys, monkeypatch):
    import duckdb
    from test_hostile import cli, one_line_error

    import capaudit
    from capaudit.store.sets import SetQueries

    def no_room(self, set_id):
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of "
                                          "size 256.0 KiB (30.4 MiB/30.5 MiB used)")

    monkeypatch.setattr(SetQueries, "finalize_set", no_room)
    db = tmp_path / "s.duckdb"
    code, _, err = cli(["sets", "add", "nic", capaudit.demo_file("nic.jsonl"), "--db", db],
                       capsys)
    line = one_line_error(err)
    assert code == 2 and "Out of Memory Error: could not allocate" in line
    assert "unfinished transaction was rolled back" in line
    monkeypatch.undo()
    assert Store(db).find_set("nic") is None


def test_a_store_left_open_is_checkpointed_at_exit(tmp_path):
    """A program that ends without closing its store (a script on the API) leaves no
    write-ahead log for the next command to replay in memory (1.1 GB at 1.2M captions)."""
    import subprocess
    import sys

    path = tmp_path / "s.duckdb"
    code = ("import sys, pyarrow as pa\nfrom capaudit.store.db import Store\n"
            "from capaudit.store.arrow_scan import ARROW, execute_on\n"
            "s = Store(sys.argv[1])\n"
            "sid = s.create_set('d', source_path=None, format='jsonl', sha256='0' * 64, "
            "options={})\n"
            "n = 5000\n"
            "t = pa.table({'k': [f'{i}.jpg' for i in range(n)], 'i': list(range(n))})\n"
            "execute_on(s.con, f'INSERT INTO captions (set_id, row_idx, image_key, image_id, "
            "caption, meta) SELECT {sid}, i, k, i, k, NULL FROM {ARROW}', t)\n"
            # something still holds the store at exit (here a thread), so no destructor
            # closes it: only the exit hook can
            "import threading, time\n"
            "threading.Thread(target=lambda: time.sleep(60) or s, daemon=True).start()\n")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    assert not path.with_name(path.name + ".wal").exists()
    store = Store(path)
    try:
        assert store.one("SELECT count(*) FROM captions")[0] == 5000
    finally:
        store.close()
