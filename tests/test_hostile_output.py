"""Issue #33, third hostile pass: bounded, isolated, printable output.

Cases 6 (``query`` streamed and written by COPY), 7 (a plugin that fails to import), 8
(``--out .``/``/`` and ``--report /``) and the output cases of 11 (any console encoding,
a ``|`` in a set name in the leaderboard's Markdown table).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import duckdb
import pytest
from plugin_site import installed_plugin
from test_hostile import _env, cli, one_line_error

import capaudit

NIC = capaudit.demo_file("nic.jsonl")
OSCAR = capaudit.demo_file("oscar.jsonl")
ANNOTATIONS = ["--instances", capaudit.demo_file("instance_categories.jsonl"), "--chair-gt",
               capaudit.demo_file("chair_gt.jsonl"), "--demographics",
               capaudit.demo_file("demographics.jsonl")]


@pytest.fixture
def big(tmp_path_factory):
    """A store whose ``numbers`` table holds 25,000 rows (three batches of the stream)."""
    db = tmp_path_factory.mktemp("q") / "s.duckdb"
    capaudit.open(db).add_set("nic", NIC)
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE numbers AS SELECT i, 'w' || i AS word, i % 7 = 0 AS seventh "
                "FROM range(25000) t(i)")
    con.close()
    return db


# -- 6. query: streamed to the terminal, COPY to a file ---------------------------------------
def test_csv_and_json_print_every_row_of_a_result_larger_than_a_batch(big, capsys):
    code, out, err = cli(["query", "SELECT * FROM numbers ORDER BY i", "--csv", "--db", big],
                         capsys)
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == ["i", "word", "seventh"], err
    assert rows[1:] == [[str(i), f"w{i}", str(i % 7 == 0)] for i in range(25000)]
    code, out, _ = cli(["query", "SELECT i FROM numbers ORDER BY i", "--json", "--db", big],
                       capsys)
    assert [json.loads(ln)["i"] for ln in out.splitlines()] == list(range(25000))


def test_a_long_result_prints_as_a_grid_with_one_header(big, capsys):
    code, out, _ = cli(["query", "SELECT i, word FROM numbers ORDER BY i", "--db", big], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["i", "|", "word"] and len(lines) == 2 + 25000
    assert [ln.split(" | ")[0].strip() for ln in lines[2:]] == [str(i) for i in range(25000)]


@pytest.mark.parametrize("name, read", [
    ("out.csv", lambda p: [int(r["i"]) for r in csv.DictReader(open(p))]),
    ("out.jsonl", lambda p: [json.loads(ln)["i"] for ln in open(p)]),
    ("out.parquet", lambda p: duckdb.sql(f"SELECT i FROM '{p}'").fetchnumpy()["i"].tolist())])
def test_out_writes_the_whole_result_by_copy(big, tmp_path, capsys, name, read):
    out = tmp_path / name
    code, _, err = cli(["query", "SELECT i FROM numbers ORDER BY i", "--out", out, "--db", big],
                       capsys)
    assert code == 0, err
    assert read(out) == list(range(25000))
    assert json.loads(out.with_name(name + ".provenance.json").read_text())["config"]["sql"] \
        == "SELECT i FROM numbers ORDER BY i"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, name + ".provenance.json"])


def test_out_may_write_only_its_own_file(big, tmp_path, capsys):
    victim = tmp_path / "victim.csv"
    victim.write_text("mine\n")
    sql = f"COPY (SELECT 1) TO '{victim}'"
    code, _, err = cli(["query", f"SELECT * FROM read_csv('{victim}')", "--out",
                        tmp_path / "o.csv", "--db", big], capsys)
    assert code == 2 and "query refused" in one_line_error(err)
    code, _, err = cli(["query", sql, "--db", big], capsys)
    assert code == 2 and "query refused" in one_line_error(err)
    code, _, err = cli(["query", "SELECT 1", "--csv", "--out", big, "--db", big], capsys)
    assert code == 2 and "the output is the store" in one_line_error(err)
    assert victim.read_text() == "mine\n" and not (tmp_path / "o.csv").exists()


# -- 7. a plugin that fails to import ----------------------------------------------------------
BROKEN = 'raise RuntimeError("boom at import")\n'


@pytest.fixture
def broken_plugin(tmp_path, monkeypatch):
    from capaudit.core import registry
    from capaudit.metrics import METRICS

    monkeypatch.setattr(registry, "BROKEN", {})
    with installed_plugin(tmp_path / "site", monkeypatch, METRICS, "capaudit_boom", BROKEN,
                          "metrics", {"boom": "capaudit_boom:Boom"}):
        yield


def test_a_plugin_that_fails_to_import_is_named_once_and_left_out(broken_plugin, tmp_path,
                                                                   capsys):
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    code, out, err = cli(["audit", "metrics"], capsys)
    assert code == 0 and "vocab" in out and "boom" not in out
    assert err.splitlines() == [
        "capaudit: warning: plugin 'boom' of package capaudit-boom (entry point "
        "capaudit.metrics: capaudit_boom:Boom) cannot be loaded (RuntimeError: boom at "
        "import); left out (see capaudit plugins)"]
    code, out, err = cli(["audit", "run", "nic", "--n-boot", "10", *ANNOTATIONS, "--db", db],
                         capsys)
    assert code == 0 and "Traceback" not in err and "warning" not in err   # named once
    code, out, _ = cli(["plugins"], capsys)
    assert code == 2 and "1 broken plugin(s)" in out
    from capaudit.cli.plugins import plugin_rows

    assert ("metrics", "boom", "capaudit-boom", "capaudit_boom:Boom",
            "broken: RuntimeError: boom at import") in plugin_rows()
    code, _, err = cli(["audit", "run", "nic", "--metrics", "boom", "--db", db], capsys)
    assert code == 2 and "cannot import the plugin capaudit_boom:Boom" in one_line_error(err)


def test_help_works_with_a_broken_plugin(broken_plugin, capsys):
    for args in (["--help"], ["audit", "run", "--help"], ["audit", "leaderboard", "--help"]):
        code, out, err = cli(args, capsys)
        assert code == 0 and "Usage" in out and "Traceback" not in err


# -- 8. outputs that are a folder or the root --------------------------------------------------
@pytest.mark.parametrize("out", [".", "/"])
def test_export_to_the_working_folder_or_root_is_one_line(tmp_path, capsys, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    before = sorted(os.listdir(tmp_path))
    code, _, err = cli(["sets", "export", "nic", "--to", "jsonl", "--out", out, "--db", db],
                       capsys)
    assert code == 2 and f"{out}: not a file name" in one_line_error(err)
    assert sorted(os.listdir(tmp_path)) == before


def test_compare_report_into_the_root_is_refused_before_any_work(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    for name, path in (("nic", NIC), ("oscar", OSCAR)):
        assert cli(["sets", "add", name, path, "--db", db], capsys)[0] == 0
    root = sorted(os.listdir("/"))
    code, _, err = cli(["audit", "compare", "nic", "oscar", "--report", "/", "--n-boot", "10",
                        *ANNOTATIONS, "--db", db], capsys)
    assert code == 2 and "the output folder is the working folder or the file-system root" \
        in one_line_error(err)
    assert sorted(os.listdir("/")) == root
    assert capaudit.open(db).query("SELECT count(*) FROM runs").rows == [(0,)]


# -- 11. any console encoding; a pipe in a set name ------------------------------------------
def _ascii(args, cwd):
    return subprocess.run([sys.executable, "-m", "capaudit.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
                          env={**_env(), "PYTHONIOENCODING": "ascii"})


def test_an_ascii_console_prints_every_message_before_and_after_a_write(tmp_path):
    name = "caf\u00e9 \u2713"
    db = tmp_path / "s.duckdb"
    added = _ascii(["sets", "add", name, NIC, "--db", db], tmp_path)
    assert added.returncode == 0 and "added caf\\xe9 \\u2713: 1,000 captions" in \
        " ".join(added.stdout.split()), added.stderr
    listed = _ascii(["sets", "list", "--db", db], tmp_path)
    assert listed.returncode == 0 and "caf\\xe9" in listed.stdout, listed.stderr
    missing = _ascii(["sets", "add", name, tmp_path / "n\u00e9.jsonl", "--db", db], tmp_path)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "n\\xe9.jsonl: no such file or folder" in missing.stderr
    assert "Traceback" not in added.stderr + listed.stderr + missing.stderr


def test_a_pipe_in_a_set_name_stays_in_its_cell_of_the_leaderboard_table(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    for name, path in (("nic", NIC), ("a|b", OSCAR)):
        assert cli(["sets", "add", name, path, "--db", db], capsys)[0] == 0
    md = tmp_path / "lb.md"
    code, _, err = cli(["audit", "leaderboard", "nic", "a|b", "--markdown", md, "--n-boot",
                        "10", *ANNOTATIONS, "--db", db], capsys)
    assert code == 0, err
    blocks, block = [], []
    for ln in md.read_text().splitlines() + [""]:
        if ln.startswith("|"):
            block.append(ln)
        elif block:
            blocks, block = blocks + [block], []
    heads = [b[0] for b in blocks]
    assert len(blocks) == 3 and all(h.endswith("| nic | a\\|b |") for h in heads)
    for b in blocks:   # every row has as many cells as its header: the pipe split none
        widths = {ln.replace("\\|", "").count("|") for ln in b}
        assert widths == {b[0].replace("\\|", "").count("|")}, b


def test_reliability_doc_lists_every_test_of_the_third_pass():
    import re
    from pathlib import Path

    here = Path(__file__).resolve().parent
    doc = (here.parent / "docs" / "reliability.md").read_text()
    names = [n for f in ("test_hostile_store.py", "test_hostile_values.py",
                         "test_hostile_output.py")
             for n in re.findall(r"^def (test_\w+)", (here / f).read_text(), flags=re.M)]
    assert [n for n in names if f"`{n}`" not in doc and "reliability_doc" not in n] == []
