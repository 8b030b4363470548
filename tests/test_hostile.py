"""Hostile inputs and faults against the store, the readers and the CLI (issue #11).

Each test reproduces a failure that was reported (the reproduction first, then the
promise): a query that cannot leave the store, ids never rounded, one rule for
captions, one line for every failure (exit 2), Ctrl-C as exit 130, data printed
through rich shown as itself, spreadsheet-safe review files, odd checkpoints and
configs, read commands that create nothing. docs/reliability.md lists the same cases.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import capaudit
from capaudit.cli.main import main

SRC = Path(capaudit.__file__).resolve().parents[1]


def cli(args, capsys):
    """In-process run; an exception escaping main() would be the traceback users see."""
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}


def sub(args, timeout: float = 120):
    """A real process (exit codes and tracebacks as a shell sees them)."""
    return subprocess.run([sys.executable, "-m", "capaudit.cli.main", *map(str, args)],
                          capture_output=True, text=True, env=_env(), timeout=timeout)


def one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("capaudit: error: "), err
    assert "Traceback" not in err
    return lines[0]


def snapshot(db: Path):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT (SELECT list(name ORDER BY name) FROM caption_sets), "
                           "(SELECT count(*) FROM captions), "
                           "(SELECT sum(hash(caption)) FROM captions)").fetchall()
    finally:
        con.close()


def stored(db: Path, name: str):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT image_key, image_id, caption FROM captions JOIN caption_sets "
                           "USING (set_id) WHERE name = ? ORDER BY row_idx", [name]).fetchall()
    finally:
        con.close()


@pytest.fixture
def nic_db(tmp_path, shared, capsys):
    """A store holding the real NIC captions of COCO val2014 (10,780 captions)."""
    db = tmp_path / "q.duckdb"
    nic = shared("data", "captioners", "nic_val2014_gender.jsonl")
    code, _, err = cli(["sets", "add", "nic", nic, "--db", db], capsys)
    assert code == 0, err
    return db


# -- 1. capaudit query cannot leave the store --------------------------------------------------
def _escapes(tmp_path, db):
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE captions AS SELECT 1 AS a")
    con.close()
    return {
        "copy over the store": f"COPY (SELECT 'x' AS a) TO '{db}' (FORMAT csv)",
        "copy to a file": f"COPY (SELECT 1 AS a) TO '{tmp_path / 'leak.csv'}' (FORMAT csv)",
        "read a system file": "SELECT * FROM read_csv('/etc/passwd', header=false)",
        "attach another db": f"ATTACH '{other}' AS o (READ_WRITE); DELETE FROM o.captions",
        "install an extension": "INSTALL httpfs",
        "load an extension": "LOAD httpfs",
        "unlock the config": "SET enable_external_access = true",
        "glob the disk": "SELECT * FROM glob('/etc/*')",
    }, other


@pytest.mark.parametrize("write", [False, True], ids=["read-only", "--write"])
def test_query_cannot_touch_files_network_or_other_databases(nic_db, tmp_path, capsys, write):
    before = snapshot(nic_db)
    cases, other = _escapes(tmp_path, nic_db)
    for what, sql in cases.items():
        code, _, err = cli(["query", sql, "--db", nic_db] + (["--write"] if write else []), capsys)
        line = one_line_error(err)
        assert code == 2, what
        # the behaviour, not a wording: DuckDB 2 refuses some of these itself (a Binder Error
        # for COPY over the open store) before capaudit's sandbox does; either way one line
        assert line.startswith("capaudit: error: query "), (what, line)
    assert snapshot(nic_db) == before
    assert not (tmp_path / "leak.csv").exists()
    con = duckdb.connect(str(other), read_only=True)
    assert con.execute("SELECT count(*) FROM captions").fetchone()[0] == 1
    con.close()


def test_query_changes_the_store_only_with_write(nic_db, capsys):
    before = snapshot(nic_db)
    code, _, err = cli(["query", "DELETE FROM captions", "--db", nic_db], capsys)
    assert code == 2 and "read-only" in one_line_error(err)
    assert snapshot(nic_db) == before
    code, _, _ = cli(["query", "CREATE TABLE notes AS SELECT 42 AS a", "--write", "--db", nic_db],
                     capsys)
    assert code == 0
    code, out, _ = cli(["query", "SELECT a FROM notes", "--csv", "--db", nic_db], capsys)
    assert code == 0 and out.splitlines() == ["a", "42"]


# -- 5 and 10. ids: never rounded; a type change after the sample is no failure --------------
def test_non_integral_ids_are_kept_as_text_never_rounded(tmp_path, capsys):
    values = [1.5, "7.6", 3.0, "COCO_val2014_000000000042.jpg", 12, "12", "sa_1.jpg", -4.5,
              1e30, "000000000009.jpg", 10**19, -7]
    f = tmp_path / "ids.jsonl"
    f.write_text("".join(json.dumps({"image_id": v, "caption": f"caption {i}"}) + "\n"
                         for i, v in enumerate(values)))
    db = tmp_path / "r.duckdb"
    assert cli(["sets", "add", "ids", f, "--db", db], capsys)[0] == 0
    ids = [r[1] for r in stored(db, "ids")]
    # hand-derived: whole numbers (0..18 digits) and COCO file names are COCO ids; in JSONL a
    # float is read as its text ("3.0"), so it stays text too
    assert ids == [None, None, None, 42, 12, 12, None, None, None, 9, None, None]
    assert [r[0] for r in stored(db, "ids")][:2] == ["1.5", "7.6"]  # the key keeps the text


def test_parquet_float_ids_not_rounded(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    f = tmp_path / "f.parquet"
    pq.write_table(pa.table({"image_id": [1.0, 2.5, 7.6], "caption": ["a", "b", "c"]}), f)
    db = tmp_path / "p.duckdb"
    assert cli(["sets", "add", "p", f, "--db", db], capsys)[0] == 0
    # one id rule for every file (#33.11): a float is no image id, not even 1.0 (a JSON 3.0
    # is refused by COCO files and annotation files alike); the value stays its text key
    assert [r[1] for r in stored(db, "p")] == [None, None, None]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_ids_turning_into_file_names_after_30000_rows(tmp_path, capsys, fmt):
    n_int, n_name = 30_000, 5
    rows = [(i, f"a dog number {i}") for i in range(1, n_int + 1)]
    rows += [(f"COCO_val2014_{i:012d}.jpg", f"a cat number {i}") for i in range(1, n_name + 1)]
    f = tmp_path / f"mixed.{fmt}"
    if fmt == "jsonl":
        f.write_text("".join(json.dumps({"image_id": k, "caption": c}) + "\n" for k, c in rows))
    else:
        with open(f, "w", newline="") as fh:
            csv.writer(fh).writerows([("image_id", "caption"), *rows])
    db = tmp_path / "m.duckdb"
    code, _, err = cli(["sets", "add", "m", f, "--db", db], capsys)
    assert code == 0, err
    got = stored(db, "m")
    assert len(got) == n_int + n_name
    assert [r[1] for r in got[-n_name:]] == [1, 2, 3, 4, 5]
    assert got[n_int - 1][1] == n_int


# -- 11. a caption is a string, in every reader -------------------------------------------------
@pytest.mark.parametrize("bad", [5, ["x"], {"t": "x"}, True, 2.5])
def test_jsonl_non_string_caption_names_the_row(tmp_path, capsys, bad):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"image_id": 1, "caption": "a cat"}) + "\n"
                 + json.dumps({"image_id": 2, "caption": bad}) + "\n")
    db = tmp_path / "c.duckdb"
    code, _, err = cli(["sets", "add", "c", f, "--db", db], capsys)
    line = one_line_error(err)
    assert code == 2 and "row 2" in line and "not a string" in line
    assert not db.exists() or snapshot(db)[0][0] is None


@pytest.mark.parametrize("column", [[5, 6], [b"\x00\xff", b"x"], [["a"], ["b"]]],
                         ids=["int", "binary", "list"])
def test_parquet_non_string_caption_is_refused(tmp_path, capsys, column):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    f = tmp_path / "c.parquet"
    pq.write_table(pa.table({"image_id": [1, 2], "caption": column}), f)
    code, _, err = cli(["sets", "add", "c", f, "--db", tmp_path / "c.duckdb"], capsys)
    line = one_line_error(err)
    assert code == 2 and "row 1" in line and "not text" in line


def test_coco_non_string_caption_names_the_row(tmp_path, capsys):
    f = tmp_path / "coco.json"
    f.write_text(json.dumps({"images": [{"id": 1}], "annotations": [
        {"image_id": 1, "caption": "a cat"}, {"image_id": 1, "caption": 5}]}))
    code, _, err = cli(["sets", "add", "c", f, "--format", "coco", "--db", tmp_path / "c.duckdb"],
                       capsys)
    assert code == 2 and "row 2" in one_line_error(err)


# -- 6. Ctrl-C: one line, exit 130, nothing half-stored ---------------------------------------
@pytest.mark.slow
def test_sigint_during_sets_add(tmp_path):
    """SIGINT (what Ctrl-C and `timeout -s INT` send) once the command is at work: sent
    when the store file exists, so a slow start cannot make it land during Python imports."""
    import signal

    big = tmp_path / "big.jsonl"
    with open(big, "w") as fh:
        for i in range(1_500_000):
            fh.write('{"image_id": %d, "caption": "a man riding a horse on a beach %d"}\n' % (i, i))
    db = tmp_path / "k.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "capaudit.cli.main", "sets", "add", "big",
                             str(big), "--db", str(db)], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not db.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert err.strip().splitlines() == ["capaudit: interrupted, nothing stored"]
    assert snapshot(db)[0][0] is None  # the store holds no set, not half of one


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("Query interrupted"),
                                 duckdb.InterruptException("INTERRUPT Error: interrupted")],
                         ids=["python", "duckdb-runtime", "duckdb-interrupt"])
def test_interrupt_anywhere_is_exit_130(tmp_path, capsys, monkeypatch, exc):
    import capaudit.io.ingest as ingest

    def boom(*a, **k):
        raise exc
    monkeypatch.setattr(ingest, "add_caption_set", boom)
    f = tmp_path / "a.jsonl"
    f.write_text('{"image_id": 1, "caption": "a dog"}\n')
    code, _, err = cli(["sets", "add", "a", f, "--db", tmp_path / "a.duckdb"], capsys)
    assert code == 130 and err.strip() == "capaudit: interrupted, nothing stored"


def test_interrupt_says_what_was_kept(tmp_path, capsys, monkeypatch):
    import capaudit.io.ingest as ingest
    from capaudit.cli.common import keep_on_interrupt

    def boom(*a, **k):
        keep_on_interrupt("3 finished shards kept; rerun to resume")
        raise KeyboardInterrupt
    monkeypatch.setattr(ingest, "add_caption_set", boom)
    f = tmp_path / "a.jsonl"
    f.write_text('{"image_id": 1, "caption": "a dog"}\n')
    code, _, err = cli(["sets", "add", "a", f, "--db", tmp_path / "a.duckdb"], capsys)
    keep_on_interrupt(None)
    assert code == 130 and err.strip() == ("capaudit: interrupted, 3 finished shards kept; "
                                           "rerun to resume")


# -- 7. usage errors: the usage message, exit 2 ----------------------------------------------
@pytest.mark.parametrize("args, says", [
    (["sets", "add"], "Missing argument"),
    (["sets", "list", "--bogus"], "No such option"),
    (["shards", "build", "x", "y", "--out", "z", "--shard-size", "0"], "--shard-size"),
    (["nonsense"], "No such command"),
    (["audit", "run", "x", "--n-boot", "many"], "Invalid value for '--n-boot'"),
])
def test_usage_errors_exit_2_with_usage(args, says, capsys):
    code, _, err = cli(args, capsys)
    assert code == 2 and "Usage: capaudit" in err and says in err and "Traceback" not in err


def test_usage_error_in_a_real_process():
    r = sub(["sets", "add"])
    assert r.returncode == 2 and "Usage: capaudit sets add" in r.stderr
    assert "Traceback" not in r.stderr


# -- 9. data printed through rich is shown as itself ------------------------------------------
def test_markup_in_captions_and_set_names_is_printed_verbatim(tmp_path, capsys):
    f = tmp_path / "m.jsonl"
    f.write_text(json.dumps({"image_id": 1, "caption": "a [/bold] dog [a] [red]x :dog:"}) + "\n")
    db = tmp_path / "m.duckdb"
    # "[b]oops", not "[/oops]": a set name may not hold a path separator (issue 25)
    for name in ("m", "[b]oops"):
        code, out, err = cli(["sets", "add", name, f, "--db", db], capsys)
        assert code == 0, err
        assert name in out
    code, out, err = cli(["sets", "show", "m", "--db", db], capsys)
    assert code == 0 and "a [/bold] dog [a] [red]x :dog:" in out, err
    code, out, err = cli(["sets", "list", "--db", db], capsys)
    assert code == 0 and "[b]oops" in out, err
    code, out, err = cli(["query", "SELECT caption, '[/i]' AS \"[b]\" FROM captions LIMIT 1",
                          "--db", db], capsys)
    assert code == 0 and "a [/bold] dog [a] [red]x :dog:" in out and "[/i]" in out \
        and "[b]" in out


def _markup_prints(path: Path):
    """console.print calls whose literal text holds rich tags but lack markup=True."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "print" and node.args):
            lit = "".join(part.value for arg in node.args[:1] for part in ast.walk(arg)
                          if isinstance(part, ast.Constant) and isinstance(part.value, str))
            opted_in = any(k.arg == "markup" for k in node.keywords)
            if "[/" in lit and not opted_in:
                yield f"{path.name}:{node.lineno}"


def test_styled_lines_opt_into_markup():
    """The consoles print data verbatim (markup off): a line written with [bold] tags must
    say markup=True (and escape its data with esc()), or the tags print as text."""
    found = [hit for p in (SRC / "capaudit").rglob("*.py") for hit in _markup_prints(p)]
    assert found == []


def _escapes_outside_markup(path: Path):
    """escape()/esc() calls not inside a print(..., markup=True): with markup off they would
    print their backslashes (a table cell, a title or a plain line shows data as it is)."""
    tree = ast.parse(path.read_text())
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(k.arg == "markup" for k in node.keywords):
            allowed.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("escape", "esc") and id(node) not in allowed):
            yield f"{path.name}:{node.lineno}"


def test_data_is_escaped_only_where_markup_is_on():
    found = [hit for p in (SRC / "capaudit" / "cli").rglob("*.py")
             for hit in _escapes_outside_markup(p)]
    assert found == []


# -- 12. review CSV: no spreadsheet formulas, round trip intact -------------------------------
def test_review_csv_neutralises_formulas_and_round_trips(store, tmp_path):
    pa = pytest.importorskip("pyarrow")
    from capaudit.filters.review import export_review, import_review

    caps = ['=HYPERLINK("http://evil","x")', "+1+1", "-2 dogs", "@SUM(A1)", "'=quoted",
            "\tleading tab", "a plain dog"]
    store.add_set_from_table("s", pa.table({
        "image_key": [str(i) for i in range(len(caps))],
        "image_id": pa.array(range(len(caps)), pa.int64()), "caption": caps,
        "meta": [None] * len(caps)}), source="t", format="t")
    path = tmp_path / "review.csv"
    assert export_review(store, "s", path, all_rows=True) == len(caps)
    with open(path, newline="", encoding="utf-8") as fh:
        cells = [row["caption"] for row in csv.DictReader(fh)]
    assert all(not c.startswith(("=", "+", "-", "@", "\t")) for c in cells)
    assert cells[-1] == "a plain dog"
    info, summary, refused = import_review(store, "s", path, "back")
    assert refused == []
    assert store.captions("back").column("caption").to_pylist() == caps


# -- 13. odd checkpoints, model weights, configs, JSON and stores: one line each --------------
@pytest.mark.parametrize("kind", ["list", "no-fingerprint", "truncated", "garbage", "empty"])
def test_odd_checkpoints_are_one_line(tmp_path, kind):
    torch = pytest.importorskip("torch")
    from capaudit.errors import InputError
    from capaudit.train_downstream.checkpoint import CHECKPOINT, REQUIRED_KEYS, load_checkpoint

    p = tmp_path / CHECKPOINT
    if kind == "list":
        torch.save([1, 2], p)
    elif kind == "no-fingerprint":
        torch.save({"model": {}, "step": 3}, p)
    elif kind == "truncated":
        torch.save({"fingerprint": "x", "model": {"w": torch.zeros(1000)}}, p)
        p.write_bytes(p.read_bytes()[:3000])
    else:
        p.write_bytes(b"hello" if kind == "garbage" else b"")
    with pytest.raises(InputError, match="not a capaudit checkpoint"):
        load_checkpoint(tmp_path, required=REQUIRED_KEYS)  # as a resume in train.py loads it


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickled_model_weights_are_refused_unread(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    import pickle

    from capaudit.errors import InputError
    from capaudit.train_downstream.train import load_model_and_tokenizer

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "blip"}))
    (model / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="pickled weights"):
        load_model_and_tokenizer(model)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("text, says", [
    ("audit:\n  n_bot: 5\n", "unknown option 'n_bot' in 'audit' (fix: did you mean 'n_boot'?"),
    ("a: &a [*a]\naudit: *a\n", "circular YAML alias"),
    ("audit: &a\n  x: *a\n", "circular YAML alias"),
    ("audit: [1, 2]\n", "'audit' must be a mapping"),
])
def test_odd_yaml_configs_are_one_line(tmp_path, capsys, text, says):
    y = tmp_path / "c.yaml"
    y.write_text(text)
    f = tmp_path / "one.jsonl"
    f.write_text('{"image_id": 1, "caption": "a dog on a bed"}\n')
    code, _, err = cli(["audit", "run", f, "--config", y, "--db", tmp_path / "d.duckdb"], capsys)
    assert code == 2 and says in one_line_error(err)


@pytest.mark.parametrize("what", ["coco", "jsonl", "annotations"])
def test_100000_deep_json_is_one_line(tmp_path, capsys, what):
    d = 100_000
    deep = "[" * d + "]" * d
    f = tmp_path / ("deep.jsonl" if what == "jsonl" else "deep.json")
    if what == "jsonl":
        f.write_text('{"image_id": 1, "caption": "a", "x": ' + deep + "}\n")
    else:
        f.write_text('{"images": ' + deep + ', "annotations": [], "categories": []}')
    db = tmp_path / "d.duckdb"
    args = (["annotations", "add", "instances", f] if what == "annotations" else
            ["sets", "add", "deep", f] + (["--format", "coco"] if what == "coco" else []))
    code, _, err = cli(args + ["--db", db], capsys)
    line = one_line_error(err)
    assert code == 2 and f.name in line


@pytest.mark.parametrize("keep", [0.0, 0.001, 0.01, 0.5, 0.95])
def test_truncated_store_is_one_line(nic_db, tmp_path, capsys, keep):
    data = nic_db.read_bytes()
    bad = tmp_path / "cut.duckdb"
    bad.write_bytes(data[:int(len(data) * keep)])
    f = tmp_path / "one.jsonl"
    f.write_text('{"image_id": 1, "caption": "a dog"}\n')
    for args in (["sets", "add", "x", f], ["sets", "show", "nic"], ["sets", "list"]):
        code, _, err = cli(args + ["--db", bad], capsys)  # no exception escapes main()
        if keep < 0.9:  # the catalog itself is gone
            assert code == 2, args
        if code:  # near the end, a read may find all it needs before the cut
            assert code == 2 and "cut.duckdb" in one_line_error(err), args


# -- 15. read commands create nothing; a held lock names the other process --------------------
@pytest.mark.parametrize("args", [["sets", "list"], ["sets", "show", "x"], ["query", "SELECT 1"],
                                  ["sets", "remove", "x"], ["annotations", "list"]])
def test_read_commands_do_not_create_a_store(tmp_path, capsys, args):
    db = tmp_path / "typo.duckdb"
    code, _, err = cli(args + ["--db", db], capsys)
    assert code == 2 and "database not found" in one_line_error(err)
    assert not db.exists()


def test_lock_conflict_names_the_other_process(nic_db, capsys):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); time.sleep(60)", str(nic_db)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = cli(["sets", "list", "--db", nic_db], capsys)
        line = one_line_error(err)
        assert code == 2 and f"another capaudit process (pid {holder.pid}) holds the store" in line
    finally:
        holder.kill()
        holder.wait()


# -- fuzz: JSONL and CSV readers --------------------------------------------------------------
# Each file is a mix of valid records and hostile lines. The promise: the set is stored and
# equals the valid records, or the command fails with exit 2 naming a row -- the first line
# DuckDB cannot parse (bad UTF-8, malformed JSON, not an object, a caption that is not a
# string, a ragged CSV row) or else the first record with an empty caption. Never a traceback.

_WS = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
_caption = _text.filter(lambda t: t.strip(_WS))
# no subnormals: a library loaded earlier in the suite may set flush-to-zero (fast-math), and
# hypothesis then refuses to draw them (the readers' rule does not depend on them)
_id = st.one_of(st.integers(-10**19, 10**19),
                st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False),
                st.builds("COCO_val2014_{:012d}.jpg".format, st.integers(0, 10**12 - 1)),
                _text, st.none())
_STRUCTURAL = "structural"  # DuckDB cannot read the file: the first such line is named


def _jsonl_line():
    valid = st.tuples(_id, _caption).map(
        lambda t: ("ok", json.dumps({"image_id": t[0], "caption": t[1]}).encode(), t))
    hostile = st.sampled_from([
        ("empty", b'{"image_id": 1, "caption": " \\t\\u3000"}'),
        ("empty", b'{"image_id": 1, "caption": null}'),
        ("empty", b'{"image_id": 1, "caption": ""}'),
        (_STRUCTURAL, b'{"image_id": 1, "caption": 5}'),
        (_STRUCTURAL, b'{"image_id": 1, "caption": ["a"]}'),
        (_STRUCTURAL, b'{"image_id": 1, "caption": "cut'),
        (_STRUCTURAL, b'[1, 2]'),
        (_STRUCTURAL, b'{"image_id": 1, "caption": "\xff\xfe"}'),
        ("blank", b""),
        ("blank", b"   "),
    ]).map(lambda t: (t[0], t[1], None))
    return st.one_of(valid, valid, hostile)


_DIGITS = frozenset("0123456789")


def _coco_number(name: str) -> int | None:
    """The number of a COCO-style file name, by the rule written out: the base name is
    ``<1-12 digits>.<jpg|jpeg|png>``, optionally after ``COCO_<letters><4 digits>_``."""
    stem, dot, ext = name.rsplit("/", 1)[-1].rpartition(".")
    if not dot or ext.lower() not in ("jpg", "jpeg", "png"):
        return None
    if stem[:5].upper() == "COCO_":
        split_year, _, stem = stem[5:].partition("_")
        letters, year = split_year[:-4], split_year[-4:]
        if not (letters.isascii() and letters.isalpha() and set(year) <= _DIGITS
                and len(year) == 4):
            return None
    return int(stem) if 1 <= len(stem) <= 12 and set(stem) <= _DIGITS else None


def _expected_id(value) -> int | None:
    """The id a JSON Lines reader stores for ``value``, by the rule io/imageids.py states,
    written out here independently of its code: integers 0 <= id < 10**18; a JSON float is
    read as its text ("3.0", "1e+30": never an id); text of 1 to 18 ASCII digits (spaces
    around allowed) or a COCO file name; anything else None."""
    if value is None or isinstance(value, (bool, float)):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 10**18 else None
    text = value.strip(" \t\n\r\f")
    if 1 <= len(text) <= 18 and set(text) <= _DIGITS:
        return int(text)
    return _coco_number(value)


def _expect(lines, row_of):
    """(None, valid records) or (first row that must be named, None)."""
    structural = [row_of(i) for i, (kind, _, _) in enumerate(lines) if kind == _STRUCTURAL]
    if structural:
        return structural[0], None
    empty = [row_of(i) for i, (kind, _, _) in enumerate(lines) if kind == "empty"]
    if empty:
        return empty[0], None
    return None, [t for kind, _, t in lines if kind == "ok"]


@pytest.fixture(scope="module")
def mem_store():
    """One in-memory store for all examples (no fsync per example): each adds its own set,
    and a failure must leave the store as it was."""
    from capaudit.store import Store

    s = Store.in_memory()
    yield s
    s.close()


_names = iter(range(10**9))


def _add(path: Path, store):
    """add_caption_set as `sets add` calls it: a set, or an InputError (the CLI's one line,
    exit 2); any other exception fails the test as the traceback it would be."""
    from capaudit.errors import InputError
    from capaudit.io.ingest import add_caption_set

    name = f"s{next(_names)}"
    before = store.sql("SELECT count(*), list(name) FROM caption_sets")
    try:
        add_caption_set(store, name, path)
    except InputError as exc:
        assert store.sql("SELECT count(*), list(name) FROM caption_sets") == before
        return str(exc), name
    return None, name


def _stored(store, name):
    return [tuple(r.values()) for r in
            store.captions(name, "image_key, image_id, caption").to_pylist()]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_jsonl_line(), min_size=1, max_size=8))
def test_fuzz_jsonl_reader(lines, mem_store, tmp_path_factory):
    f = tmp_path_factory.getbasetemp() / "fuzz.jsonl"
    f.write_bytes(b"".join(raw + b"\n" for _, raw, _ in lines))
    row, valid = _expect(lines, lambda i: i + 1)
    err, name = _add(f, mem_store)
    if valid == []:  # nothing but blank lines
        assert err and "holds no captions" in err
    elif valid is not None:
        assert err is None, err
        got = _stored(mem_store, name)
        assert [g[2] for g in got] == [c for _, c in valid]
        assert [g[1] for g in got] == [_expected_id(i) for i, _ in valid]
    else:
        assert err and f", row {row}:" in err, (row, err)


def _csv_record():
    valid = st.tuples(st.one_of(st.integers(0, 10**12), _text), _caption).map(
        lambda t: ("ok", t))
    empty = st.just(("empty", ("1", "")))
    ragged = st.just((_STRUCTURAL, ("1", "a", "extra")))
    return st.one_of(valid, valid, empty, ragged)


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_csv_record(), min_size=1, max_size=8))
def test_fuzz_csv_reader(records, mem_store, tmp_path_factory):
    import io

    f = tmp_path_factory.getbasetemp() / "fuzz.csv"
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["image_id", "caption"])
    starts = []
    for _, rec in records:
        # file line where the record starts (\r, \n and \r\n each end a line)
        starts.append(len(re.findall(r"\r\n|\r|\n", buf.getvalue())) + 1)
        w.writerow(rec)
    f.write_text(buf.getvalue(), encoding="utf-8", newline="")
    lines = [(kind, None, rec) for kind, rec in records]
    row, valid = _expect(lines, lambda i: starts[i])
    err, name = _add(f, mem_store)
    if valid is not None:
        assert err is None, err
        assert [g[2] for g in _stored(mem_store, name)] == [c for _, c in valid]
    else:
        assert err and f", row {row}:" in err, (row, err)


def test_reliability_doc_lists_every_hostile_test():
    """docs/reliability.md promises what this file checks: every test here has its row."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text()
    names = re.findall(r"^def (test_\w+)", Path(__file__).read_text(), flags=re.M)
    assert [n for n in names if f"`{n}`" not in doc] == []
