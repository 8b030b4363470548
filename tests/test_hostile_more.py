"""Hostile inputs beyond issue #25's list, tried as a new user would (its "Done when"):
servers that redirect or send terminal control codes or lone surrogates, outputs that fail
while written (``/dev/full``), file names that are not UTF-8, folders given as files, a
UTF-8 BOM, YAML values of the wrong type, a JSON file given as the store, Ctrl-C inside a
long DuckDB statement. Each test failed before its fix; loopback servers only, every loop
bounded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import capaudit

from capaudit.demo import DEMO_DIR
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.llm import GenRequest, make_backend
from test_hostile import _env, cli, one_line_error

NIC = DEMO_DIR / "nic.jsonl"
KEY = "sk-test-0123456789abcdefSECRET"
GOOD = json.dumps({"choices": [{"message": {"content": "stolen answer"}}]}).encode()


def _raw_server(reply, n: int = 4):
    """A loopback server that answers each of at most ``n`` connections with ``reply(port)``
    bytes and keeps what it was sent."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    got: list[bytes] = []

    def serve():
        for _ in range(n):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                got.append(data)
                conn.sendall(reply(listener.getsockname()[1]))
    threading.Thread(target=serve, daemon=True).start()
    return listener, got


# -- servers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [301, 302, 303, 307])
def test_a_redirect_is_never_followed_and_the_key_stays_home(code, monkeypatch):
    # urllib resent a 301/302/303 as a GET, Authorization header included, to the host
    # named by Location, and took that host's reply as the judge's answer
    other, other_got = _raw_server(lambda port: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                                   b"\r\n%s" % (len(GOOD), GOOD))
    to = f"http://127.0.0.1:{other.getsockname()[1]}/steal"
    judge, _ = _raw_server(lambda port: f"HTTP/1.1 {code} Moved\r\nLocation: {to}\r\n"
                           "Content-Length: 0\r\n\r\n".encode())
    monkeypatch.setenv("JUDGE_KEY", KEY)
    try:
        b = make_backend("openai", {"model": "m", "api_key_env": "JUDGE_KEY", "max_retries": 1,
                                    "base_url": f"http://127.0.0.1:{judge.getsockname()[1]}/v1"})
        [res] = b.generate([GenRequest("hello")])
    finally:
        judge.close()
        other.close()
    assert other_got == [] and res.text is None
    assert f"HTTP {code}: redirected to {to}, not followed" in res.error


@pytest.mark.parametrize("body", [b"\x1b]0;pwned\x07\x1b[2J\x1b[31mHACKED\x1b[0m",
                                  b"fine\r\ncapaudit: all good\x00\x85"])
def test_control_characters_from_a_server_never_reach_the_terminal(tmp_path, capsys, body,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    caps = tmp_path / "m.jsonl"
    caps.write_text(json.dumps({"image_id": 1, "caption": "A horse."}) + "\n")
    with FakeOpenAIServer(answer=lambda b: {"raw": body, "status": 401}) as srv:
        code, _, err = cli(["audit", "capscore", caps, "--reference", caps, "--judge-url",
                            srv.base_url, "--db", tmp_path / "j.duckdb"], capsys)
    line = one_line_error(err)   # one line: the server's \r\n cannot start a second one
    assert code == 2 and "HTTP 401" in line
    assert not any(c in line for c in "\x1b\x07\x00\r\x85"), repr(line)
    assert ("\\x1b]0;pwned\\x07" in line) if b"pwned" in body else ("fine\\x0d\\n" in line)


def test_control_characters_in_captions_are_printed_as_escapes(tmp_path, capsys):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"image_id": 1, "caption": "a dog \x1b]0;pwned\x07\x1b[2J ok"})
                 + "\n")
    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", "c", f, "--db", db], capsys)[0] == 0
    for args in (["sets", "show", "c"], ["query", "SELECT caption FROM captions"]):
        code, out, err = cli([*args, "--db", db], capsys)
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;pwned\\x07" in out


def test_a_lone_surrogate_in_an_answer_is_replaced_not_a_traceback(tmp_path):
    from test_enrich_fixtures import base_config, make_dataset

    from capaudit.enrich.runner import run_enrich

    raw = b'{"choices": [{"message": {"content": "a dog \\ud800 on a bed"}}]}'
    _, shards, _ = make_dataset(tmp_path, n_images=2, shard_size=2)
    with FakeOpenAIServer(answer=lambda b: {"raw": raw}) as srv:
        b = make_backend("openai", {"model": "m", "base_url": srv.base_url})
        assert b.generate([GenRequest("x")])[0].text == "a dog \ufffd on a bed"
        s = run_enrich(shards, tmp_path / "w", "sharegpt4v", base_config(srv.base_url))
    assert s["failures"] == [] and s["table"].column("caption").to_pylist() == \
        ["a dog \ufffd on a bed"] * 2


# -- outputs that fail while written ---------------------------------------------------------------
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("cmd", [["sets", "export", "nic", "--out", "/dev/full"],
                                 ["sets", "export", "nic", "--to", "coco", "--out", "/dev/full"],
                                 ["audit", "run", "nic", "--n-boot", "2", "--json", "/dev/full"]])
def test_an_output_device_that_is_full_is_one_line(tmp_path, capsys, cmd):
    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    code, _, err = cli([*cmd, "--db", db], capsys)
    assert code == 2 and "/dev/full: cannot write here: the disk is full" in one_line_error(err)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names a pipe by /proc/self/fd")
def test_a_pipe_whose_reader_left_is_one_line(tmp_path, capsys):
    # `--out >(head -c 10)`: the reader stops, the next write is EPIPE (a traceback)
    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        code, _, err = cli(["sets", "export", "nic", "--out", f"/proc/self/fd/{write_end}",
                            "--db", db], capsys)
    finally:
        os.close(write_end)
    assert code == 2 and "the program reading the pipe stopped" in one_line_error(err)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_standard_output_on_a_full_device_is_one_line(tmp_path):
    db = tmp_path / "a.duckdb"
    assert subprocess.run([sys.executable, "-m", "capaudit.cli.main", "sets", "add", "nic",
                           str(NIC), "--db", str(db)], env=_env(), capture_output=True,
                          timeout=120).returncode == 0
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "capaudit.cli.main", "sets", "show", "nic",
                            "--db", str(db)], env=_env(), stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    assert r.returncode == 2 and "cannot write the output" in one_line_error(r.stderr)


# -- names and paths -----------------------------------------------------------------------------
def test_file_names_that_are_not_utf8_are_one_line(tmp_path, capsys):
    bad = Path(os.fsdecode(bytes(tmp_path) + b"/ok\xffname.jsonl"))
    bad.write_text(json.dumps({"image_id": 1, "caption": "a dog"}) + "\n")
    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    for args in (["sets", "add", "x", bad], ["audit", "run", bad, "--n-boot", "2"],
                 ["annotations", "add", "chair-gt", bad],
                 ["audit", "run", "nic", "--n-boot", "2", "--json", bad.with_suffix(".json")],
                 ["sets", "export", "nic", "--out", bad.with_suffix(".out")]):
        code, _, err = cli([*args, "--db", db], capsys)
        line = one_line_error(err)
        assert code == 2 and "not valid UTF-8" in line and "ok\\xffname" in line, line


def test_a_file_name_with_a_newline_stays_one_line(tmp_path, capsys):
    bad = tmp_path / "bad\nname.jsonl"
    bad.write_text('{"image_id": 1, "caption": "a dog"}\n{"image_id": 2 "caption": "x"}\n')
    code, _, err = cli(["sets", "add", "x", bad, "--db", tmp_path / "a.duckdb"], capsys)
    line = one_line_error(err)
    assert code == 2 and "bad\\nname.jsonl, row 2: malformed JSON" in line, line


@pytest.mark.parametrize("args", [["annotations", "add", "chair-gt", "{d}"],
                                  ["annotations", "add", "instances", "{d}"],
                                  ["audit", "run", "nic", "--config", "{d}"]])
def test_a_folder_given_as_a_file_is_one_line(tmp_path, capsys, args):
    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    code, _, err = cli([a.format(d=tmp_path) for a in args] + ["--db", db], capsys)
    assert code == 2 and "it is a folder" in one_line_error(err)


def test_a_device_or_a_pipe_as_the_caption_file_is_one_line(tmp_path, capsys):
    # /dev/zero is one endless line: it was read into memory until the process was killed
    db, fifo = tmp_path / "a.duckdb", tmp_path / "captions.jsonl"
    os.mkfifo(fifo)
    for path in ("/dev/zero", fifo):
        code, _, err = cli(["sets", "add", "z", path, "--format", "jsonl", "--db", db], capsys)
        assert code == 2 and "not a file" in one_line_error(err)
    assert capaudit.open(db).sets() == []   # nothing stored


def test_a_long_set_name_of_two_byte_letters_exports(tmp_path, capsys, monkeypatch):
    # 200 letters is a legal name; as 'é' it is 400 bytes, and NAME.jsonl was over the
    # file system's 255: OSError traceback
    monkeypatch.chdir(tmp_path)
    name = "é" * 200
    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", name, NIC, "--db", db], capsys)[0] == 0
    code, _, err = cli(["sets", "export", name, "--db", db], capsys)
    assert code == 0, err
    assert (tmp_path / ("é" * 100 + ".jsonl")).stat().st_size > 0
    code, _, err = cli(["sets", "export", name, "--out", name + name + ".jsonl", "--db", db],
                       capsys)
    assert code == 2 and "the file name is too long" in one_line_error(err)


def test_a_json_file_given_as_the_store_is_refused_not_lost(tmp_path, capsys):
    # DuckDB opens an existing JSON/CSV file named as the database in memory: the set was
    # "added" (exit 0) and gone at exit
    target = tmp_path / "mine.jsonl"
    target.write_bytes(NIC.read_bytes())
    code, _, err = cli(["sets", "add", "nic", NIC, "--db", target], capsys)
    assert code == 2 and "it is not a DuckDB store" in one_line_error(err)
    assert target.read_bytes() == NIC.read_bytes()


# -- file contents and configs -----------------------------------------------------------------
@pytest.mark.parametrize("fmt, doc", [
    ("coco", {"images": [{"id": 1}], "annotations": [{"image_id": 1, "caption": "a dog"}]}),
    ("sharegpt4v", [{"id": "1", "image": "000000000001.jpg", "conversations": [
        {"from": "human", "value": "<image>describe"}, {"from": "gpt", "value": "a dog"}]}])])
def test_a_json_file_starting_with_a_bom_is_read(tmp_path, capsys, fmt, doc):
    # a JSONL file with a BOM was read; a JSON document with one was "cannot tell the format"
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
    db = tmp_path / "a.duckdb"
    code, out, err = cli(["sets", "add", "b", f, "--db", db], capsys)
    assert code == 0 and f"({fmt};" in out, err
    assert cli(["query", "SELECT caption FROM captions", "--db", db], capsys)[1].count("a dog") == 1


LAUGHS = "".join(f"{x}: &{x} [{', '.join(['*' + p] * 9)}]\n"
                 for p, x in zip("abcdefg", "bcdefgh"))


@pytest.mark.parametrize("yaml, says", [
    ("  metrics: [[chair_s]]\n", "metrics (--metrics) must be a list of names"),
    ("  metrics: 5\n", "metrics (--metrics) must be a list of names"),
    ("  mode: [[1]]\n", "mode (--mode) must be a text"),
    ("  lic: [[1]]\n", "lic (--lic) must be true or false"),
    ("  details: 'no'\n", "details (--details) must be true or false"),
    ("  metrics: *h\n", "metrics (--metrics) must be a list of names"),
    ("  n_boot: 2000\n", "the key 'n_boot' is given twice (line 11)")],
    ids=["nested-list", "number", "mode-list", "lic-list", "quoted-no", "billion-laughs",
         "key-twice"])
def test_yaml_values_of_the_wrong_type_are_one_line(tmp_path, capsys, yaml, says):
    cfg = tmp_path / "audit.yaml"
    cfg.write_text("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + LAUGHS
                   + "audit:\n  n_boot: 2\n" + yaml)
    code, _, err = cli(["audit", "run", NIC, "--config", cfg, "--db", tmp_path / "a.duckdb"],
                       capsys)
    line = one_line_error(err)
    assert code == 2 and says in line and len(line) < 400, line


# -- Ctrl-C inside one long DuckDB statement ----------------------------------------------------
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the open files from /proc")
def test_sigint_inside_a_long_query_is_honoured_within_a_second(tmp_path, capsys):
    """A statement runs in DuckDB's C++ code, where Python's Ctrl-C handler cannot run: a
    long `capaudit query` (or the one INSERT of a big `sets add`) ignored SIGINT until it
    finished; DuckDB's own interrupt now ends it at once."""
    import signal
    import time

    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    proc = subprocess.Popen([sys.executable, "-m", "capaudit.cli.main", "query",
                             "SELECT count(*) FROM range(100000000000) t(a) WHERE a % 7 = 3",
                             "--db", str(db)], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def store_open() -> bool:  # opened after the signal handling is in place
        try:
            return any(os.readlink(f) == str(db) for f in Path(f"/proc/{proc.pid}/fd").iterdir())
        except OSError:
            return False
    deadline = time.monotonic() + 60
    while not store_open() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2.0)   # surely inside the query (it runs for minutes)
    assert proc.poll() is None, "ended before the signal: " + proc.stderr.read()
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("SIGINT ignored: the query still ran 20 s later")
    took = time.monotonic() - t0
    assert proc.returncode == 130 and err.strip() == "capaudit: interrupted, nothing stored", err
    assert took < 1.5, took


def test_sigint_while_the_command_is_still_importing_is_one_line():
    """The first half second of `capaudit ...` is imports: Ctrl-C there printed a 30-line
    KeyboardInterrupt traceback. Sent here right after capaudit.cli is imported, where the
    command line would go on to import the commands."""
    code = ("import sys; sys.argv = ['capaudit', 'sets', 'list']; import capaudit.cli, os, "
            "signal, time; os.kill(os.getpid(), signal.SIGINT); time.sleep(10); "
            "import capaudit.cli.main")
    r = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 130 and r.stderr == "capaudit: interrupted, nothing stored\n", r.stderr


def test_reliability_doc_lists_every_test_here():
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text()
    names = re.findall(r"^def (test_\w+)", Path(__file__).read_text(), flags=re.M)
    assert [n for n in names if f"`{n}`" not in doc] == []
