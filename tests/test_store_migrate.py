"""Opening a store runs the DDL only when it changed since the store last saw it."""

from __future__ import annotations

from capaudit.store import schema
from capaudit.store.db import Store


def _tables(store) -> set[str]:
    return {r[0] for r in store.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def test_changed_ddl_runs_on_next_open_and_unchanged_ddl_is_skipped(tmp_path, monkeypatch):
    path = tmp_path / "s.duckdb"
    with Store(path) as store:
        assert {"meta", "captions", "caption_details", "annotation_cache"} <= _tables(store)
        first = store.one("SELECT value FROM meta WHERE key = 'schema_ddl'")[0]
    monkeypatch.setattr(schema, "DDL", schema.DDL + ["CREATE TABLE IF NOT EXISTS zz_new (x INT)"])
    with Store(path) as store:  # a new statement: the hash differs, the DDL runs
        assert "zz_new" in _tables(store)
        assert store.one("SELECT value FROM meta WHERE key = 'schema_ddl'")[0] != first
        store.con.execute("DROP TABLE zz_new")
    with Store(path) as store:  # same DDL as recorded: nothing runs (the drop stays)
        assert "zz_new" not in _tables(store)
    monkeypatch.undo()
    with Store(path) as store:  # back to the packaged DDL: its hash again
        assert store.one("SELECT value FROM meta WHERE key = 'schema_ddl'")[0] == first
        assert store.one("SELECT value FROM meta WHERE key = 'schema_version'")[0] == \
            str(schema.SCHEMA_VERSION)


def test_store_without_the_ddl_hash_is_migrated(tmp_path):
    """A store written before the hash was recorded gets the DDL run (and the hash)."""
    path = tmp_path / "old.duckdb"
    with Store(path) as store:
        store.con.execute("DELETE FROM meta WHERE key = 'schema_ddl'")
        store.con.execute("ALTER TABLE annotation_sources DROP COLUMN namespace")
    with Store(path) as store:
        cols = {r[1] for r in store.con.execute("PRAGMA table_info('annotation_sources')").fetchall()}
        assert "namespace" in cols
        assert store.one("SELECT value FROM meta WHERE key = 'schema_ddl'") is not None
