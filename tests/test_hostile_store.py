"""Issue #33, third hostile pass: nothing on disk is trusted that capaudit did not verify.

Cases 1-3 (data lost or overwritten) and 5 (the store opens what is not a store), each
run as the user would (``main([...])``): one line, exit code 2, and nothing outside
capaudit's own files changed (the victim's bytes, the foreign database's tables, the
registered source's sha256). The link, manifest and source cases run again with the
store or ``--out`` reached through a linked folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import duckdb
import pytest
from test_hostile import cli, one_line_error

import capaudit
from capaudit.store.schema import SCHEMA_VERSION

NIC = capaudit.demo_file("nic.jsonl")          # 1,000 NIC captions of COCO val2014 images
FIVE = "".join(NIC.read_text().splitlines(keepends=True)[:5])


def tree_sha(path: Path) -> str:
    """sha256 over a file, or over every file of a folder (names and bytes, sorted)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def tables(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()")
                      .fetchall())
    finally:
        con.close()


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "victim.txt"
    v.write_bytes(b"the user's own file\n")
    return v


# -- 1. a link planted at the store's side files -------------------------------------------
@pytest.mark.parametrize("side", [".wal", ".tmp"])
@pytest.mark.parametrize("through", ["direct", "linked-folder"])
def test_a_link_at_the_stores_side_file_is_refused_and_not_written_through(
        tmp_path, capsys, victim, side, through):
    """On main, a link planted at ``s.duckdb.wal`` beside an existing store had the next
    small write's log (1,202 bytes) written into the victim, then the link removed."""
    real = tmp_path / "real"
    real.mkdir()
    assert cli(["sets", "add", "nic", NIC, "--db", real / "s.duckdb"], capsys)[0] == 0
    store_sha = tree_sha(real / "s.duckdb")
    (real / f"s.duckdb{side}").symlink_to(victim if side == ".wal" else tmp_path)
    db = real / "s.duckdb"
    if through == "linked-folder":
        (tmp_path / "link").symlink_to(real)
        db = tmp_path / "link" / "s.duckdb"
    (tmp_path / "five.jsonl").write_text(FIVE)
    code, _, err = cli(["sets", "add", "five", tmp_path / "five.jsonl", "--db", db], capsys)
    line = one_line_error(err)
    assert code == 2 and f"the store's {side} file is a symbolic link" in line
    assert victim.read_bytes() == b"the user's own file\n"
    assert tree_sha(real / "s.duckdb") == store_sha and (real / f"s.duckdb{side}").is_symlink()


def test_the_store_itself_a_link_or_a_folder_is_refused(tmp_path, capsys, victim):
    (tmp_path / "s.duckdb").symlink_to(victim)
    code, _, err = cli(["sets", "add", "x", NIC, "--db", tmp_path / "s.duckdb"], capsys)
    assert code == 2 and "the store is a symbolic link, not a file" in one_line_error(err)
    (tmp_path / "d.duckdb").mkdir()
    code, _, err = cli(["sets", "add", "x", NIC, "--db", tmp_path / "d.duckdb"], capsys)
    assert code == 2 and "the store is a folder, not a file" in one_line_error(err)
    assert victim.read_bytes() == b"the user's own file\n"


def test_a_store_reached_through_a_linked_folder_works(tmp_path, capsys):
    """The folder link is the user's own layout (a home on another disk): the store is
    opened at its real place, its own name and side files checked there."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    code, out, err = cli(["sets", "add", "nic", NIC, "--db", tmp_path / "link" / "s.duckdb"],
                         capsys)
    assert code == 0 and "1,000 captions" in out, err
    assert (tmp_path / "real" / "s.duckdb").is_file()


# -- 2. a forged manifest and --overwrite ----------------------------------------------------
@pytest.mark.parametrize("through", ["direct", "linked-folder"])
def test_a_forged_manifest_never_deletes_the_store_in_use(tmp_path, capsys, monkeypatch,
                                                          through):
    monkeypatch.chdir(tmp_path)
    g = tmp_path / "G"
    g.mkdir()
    db = g / "live.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    (g / ".capaudit-files.json").write_text(json.dumps({"files": ["live.duckdb"]}))
    before = {p.name: p.read_bytes() for p in g.iterdir()}
    out, dbarg = g, db
    if through == "linked-folder":
        (tmp_path / "here").symlink_to(tmp_path)
        out, dbarg = tmp_path / "here" / "G", tmp_path / "here" / "G" / "live.duckdb"
    code, _, err = cli(["sets", "export", "nic", "--to", "webdataset", "--out", out,
                        "--overwrite", "--db", dbarg], capsys)
    line = one_line_error(err)
    assert code == 2 and "manifest cannot be trusted: it lists the store" in line
    assert {p.name: p.read_bytes() for p in g.iterdir()} == before   # nothing changed


def test_a_manifest_with_the_stores_checksum_still_cannot_remove_it(tmp_path, capsys,
                                                                    monkeypatch):
    """Whoever can write the manifest can also compute the store's sha256: the store in
    use is never removed, whatever the manifest says."""
    monkeypatch.chdir(tmp_path)
    g = tmp_path / "G"
    g.mkdir()
    db = g / "live.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    (g / ".capaudit-files.json").write_text(json.dumps(
        {"version": 2, "files": {"live.duckdb": {"size": db.stat().st_size,
                                                 "sha256": digest}}}))
    code, _, err = cli(["sets", "export", "nic", "--to", "webdataset", "--out", g,
                        "--overwrite", "--db", db], capsys)
    assert code == 2 and "it lists the store" in one_line_error(err)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_overwrite_replaces_only_files_still_as_capaudit_wrote_them(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "s.duckdb"
    (tmp_path / "five.jsonl").write_text(FIVE)
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    assert cli(["sets", "add", "five", tmp_path / "five.jsonl", "--db", db], capsys)[0] == 0
    assert cli(["sets", "export", "nic", "--to", "webdataset", "--out", "W", "--db", db],
               capsys)[0] == 0
    manifest = json.loads((tmp_path / "W" / ".capaudit-files.json").read_text())
    tar = tmp_path / "W" / "nic-00000.tar"
    assert manifest["files"]["nic-00000.tar"] == {
        "size": tar.stat().st_size, "sha256": hashlib.sha256(tar.read_bytes()).hexdigest()}
    # unchanged: an export of another set replaces capaudit's stale shard
    code, _, err = cli(["sets", "export", "five", "--to", "webdataset", "--out", "W",
                        "--overwrite", "--db", db], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "W").iterdir()) == [
        ".capaudit-files.json", "five-00000.tar", "provenance.json"]
    # edited by the user since: the file of that name is not capaudit's any more
    shard = tmp_path / "W" / "five-00000.tar"
    shard.write_bytes(shard.read_bytes() + b"user edit")
    kept = shard.read_bytes()
    code, _, err = cli(["sets", "export", "five", "--to", "webdataset", "--out", "W",
                        "--overwrite", "--db", db], capsys)
    assert code == 2 and "not the one capaudit wrote there" in one_line_error(err)
    assert shard.read_bytes() == kept


# -- 3. --overwrite into a registered source ------------------------------------------------
@pytest.mark.parametrize("through", ["direct", "linked-folder"])
def test_overwrite_never_replaces_a_registered_source(tmp_path, capsys, monkeypatch, through):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "s.duckdb"
    (tmp_path / "five.jsonl").write_text(FIVE)
    for name, path in (("nic", NIC), ("five", tmp_path / "five.jsonl")):
        assert cli(["sets", "add", name, path, "--db", db], capsys)[0] == 0
    assert cli(["sets", "export", "nic", "--to", "webdataset", "--out", "W", "--db", db],
               capsys)[0] == 0
    code, _, err = cli(["sets", "add", "x", "W", "--format", "webdataset", "--db", db], capsys)
    assert code == 0, err
    source_sha = tree_sha(tmp_path / "W")
    out = "W"
    if through == "linked-folder":
        (tmp_path / "here").symlink_to(tmp_path)
        out = str(tmp_path / "here" / "W")
    code, _, err = cli(["sets", "export", "five", "--to", "webdataset", "--out", out,
                        "--overwrite", "--db", db], capsys)
    assert code == 2 and "the output is the source folder of set 'x'" in one_line_error(err)
    assert tree_sha(tmp_path / "W") == source_sha
    code, _, err = cli(["sets", "export", "x", "--to", "jsonl", "--out", "x.jsonl",
                        "--db", db], capsys)
    assert code == 0, err   # x can still be exported: its source is as registered


def test_no_output_lands_inside_a_registered_source_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    assert cli(["sets", "export", "nic", "--to", "webdataset", "--out", "W", "--db", db],
               capsys)[0] == 0
    assert cli(["sets", "add", "x", "W", "--format", "webdataset", "--db", db], capsys)[0] == 0
    source_sha = tree_sha(tmp_path / "W")
    code, _, err = cli(["sets", "export", "nic", "--to", "jsonl", "--out", "W/new.jsonl",
                        "--db", db], capsys)
    assert code == 2 and "the source folder of set 'x'" in one_line_error(err)
    assert tree_sha(tmp_path / "W") == source_sha


# -- 5. the store opens only what is a capaudit store ---------------------------------------
def test_a_users_own_duckdb_file_is_refused_and_left_as_it_was(tmp_path, capsys):
    notes = tmp_path / "notes.duckdb"
    con = duckdb.connect(str(notes))
    con.execute("CREATE TABLE notes AS SELECT 'mine' AS t")
    con.close()
    sha = tree_sha(notes)
    code, _, err = cli(["sets", "add", "x", NIC, "--db", notes], capsys)
    line = one_line_error(err)
    assert code == 2 and "not a capaudit store: a DuckDB database with other tables (notes)" \
        in line
    assert tables(notes) == ["notes"] and tree_sha(notes) == sha


def test_a_sqlite_file_is_refused_before_duckdb_opens_it(tmp_path, capsys, monkeypatch):
    f = tmp_path / "file.sqlite"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    sha = tree_sha(f)
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")   # no extension download either
    code, _, err = cli(["sets", "add", "x", NIC, "--db", f], capsys)
    assert code == 2 and "it is not a DuckDB store (a SQLite database)" in one_line_error(err)
    assert tree_sha(f) == sha and not (tmp_path / "file.sqlite.wal").exists()


def test_a_store_of_a_newer_schema_is_refused(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    con.close()
    sha = tree_sha(db)
    for args in (["sets", "add", "y", NIC], ["sets", "list"]):
        code, _, err = cli([*args, "--db", db], capsys)
        line = one_line_error(err)
        assert code == 2 and f"newer capaudit (schema 999; this one reads up to " \
            f"{SCHEMA_VERSION})" in line and "upgrade capaudit" in line
    assert tree_sha(db) == sha


def test_a_truncated_store_is_one_line_naming_the_recovery(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(db.read_bytes()[:db.stat().st_size // 2])
    sha = tree_sha(cut)
    for args in (["sets", "list"], ["sets", "add", "y", NIC], ["query", "SELECT 1"]):
        code, _, err = cli([*args, "--db", cut], capsys)
        line = one_line_error(err)
        assert code == 2 and "the store is damaged" in line and str(cut) in line
        assert "restore the last good copy" in line and "capaudit store check" in line
    assert tree_sha(cut) == sha
    code, out, _ = cli(["store", "check", "--db", cut], capsys)
    assert code == 2 and "problems:" in out and "restore the last good copy" in out
    code, out, _ = cli(["store", "check", "--db", db], capsys)
    assert code == 0 and "captions: 1,000 rows, readable" in out


@pytest.mark.parametrize("db, says", [(":memory:", "a store in memory keeps nothing"),
                                      ("", "the store path names a folder, not a file")])
def test_a_store_in_memory_or_a_folder_is_refused(tmp_path, capsys, monkeypatch, db, says):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(["sets", "add", "x", NIC, "--db", db], capsys)
    assert code == 2 and says in one_line_error(err)
    assert os.listdir(tmp_path) == []


def test_an_older_store_is_migrated_in_one_transaction(tmp_path, capsys, monkeypatch):
    """A DDL statement failing half-way leaves the store as it was (no half migration)."""
    from capaudit.store import schema
    from capaudit.store.db import Store

    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    monkeypatch.setattr(schema, "DDL", schema.DDL + [
        "CREATE TABLE IF NOT EXISTS zz_first (x INT)", "CREATE TABLE broken (x NOSUCHTYPE)"])
    with pytest.raises(Exception):
        Store(db)
    monkeypatch.undo()
    assert "zz_first" not in tables(db) and "caption_sets" in tables(db)
    code, out, err = cli(["sets", "list", "--db", db], capsys)
    assert code == 0 and "nic" in out, err
