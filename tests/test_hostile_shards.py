"""Hostile shards, enrichment faults and misbehaving backends (issue #11, items 2-4, 8, 14, 16, 17).

Each test reproduces a reported failure on a real input built here (tars cut
with ``head -c``, a GNU sparse tar, a loopback server that sends HTML or cuts
its reply, a process killed with SIGKILL) and checks the promised outcome:
one line naming the file and exit 2, nothing stored half, the run going on.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from storage_servers import QuietHTTPServer

from capaudit.cli.main import main
from capaudit.llm import GenRequest, make_backend
from capaudit.enrich.testing import FakeOpenAIServer, answer_for
from capaudit.errors import InputError
from capaudit.store import Store
from test_enrich_fixtures import make_captions, make_dataset, make_images

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(extra)
    return env


@pytest.fixture
def cli(capsys):
    """``cli(*args, **env)``: run the CLI in-process; returncode, stdout and stderr as a process."""
    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        capsys.readouterr()
        try:
            code = main(list(args))
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def _text_tar(path: Path, n: int = 10, size: int = 1800) -> Path:
    """The issue's tar: ``n`` members ``i.txt`` of ``size`` bytes ('a dog' lines), ustar."""
    data = (b"a dog\n" * (size // 6 + 1))[:size]
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(n):
            info = tarfile.TarInfo(f"{i}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _cut(src: Path, dst: Path, n_bytes: int) -> Path:
    dst.write_bytes(src.read_bytes()[:n_bytes])
    return dst


def _set_names(db: Path) -> list[str]:
    if not db.exists():
        return []
    with Store(db, read_only=True) as store:
        return [s.name for s in store.list_sets()]


def _one_line_error(res, *needles: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- item 2: truncated and corrupt tars ----------------------------------------------
def test_whole_tar_reads_all_ten_captions(tmp_path):
    tar = _text_tar(tmp_path / "t.tar")
    assert tar.stat().st_size == 10 * (512 + 2048) + 1024 + 4096  # 10 members, EOF, record pad
    assert main(["sets", "add", "t", str(tar), "--db", str(tmp_path / "r.duckdb")]) == 0
    with Store(tmp_path / "r.duckdb", read_only=True) as store:
        assert store.get_set("t").n_captions == 10


@pytest.mark.parametrize("n_bytes, why", [(10240, "cut after member 4 (a header boundary)"),
                                          (9000, "cut inside member 4's data"),
                                          (10240 + 300, "cut inside member 5's header")])
def test_truncated_tar_is_one_line_naming_the_file_and_nothing_is_stored(tmp_path, n_bytes, why,
                                                                         cli):
    cut = _cut(_text_tar(tmp_path / "t.tar"), tmp_path / "t_trunc.tar", n_bytes)
    db = tmp_path / "r.duckdb"
    line = _one_line_error(cli("sets", "add", "t", str(cut), "--db", str(db)), str(cut))
    assert "truncated" in line, (why, line)
    assert "t" not in _set_names(db), why


def test_garbage_block_in_the_middle_is_refused_not_read_as_the_end(tmp_path, cli):
    raw = bytearray(_text_tar(tmp_path / "t.tar").read_bytes())
    raw[5 * 2560: 5 * 2560 + 512] = b"\xff" * 512      # header of member 6: bad checksum
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(raw))
    line = _one_line_error(cli("sets", "add", "t", str(bad), "--db", str(tmp_path / "r.duckdb")),
                           str(bad))
    assert "after 5 members" in line or "member 6" in line or "offset 12800" in line, line


def test_shard_index_count_mismatch_is_refused(tmp_path):
    """A capaudit shard whose tar ends cleanly but holds fewer samples than its index."""
    from capaudit.io.image_shards import read_shard

    _db, shards, _ids = make_dataset(tmp_path, n_images=4, shard_size=4)
    tar = shards / "shard-00000.tar"
    with tarfile.open(tar) as tf:
        members = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]
    with tarfile.open(tar, "w", format=tarfile.USTAR_FORMAT) as tf:   # a clean tar, 3 samples
        for m, data in members[:6]:
            tf.addfile(m, io.BytesIO(data))
    with pytest.raises(InputError) as err:
        list(read_shard(tar))
    assert str(tar) in str(err.value) and "3" in str(err.value) and "4" in str(err.value)


def test_enrich_refuses_a_truncated_input_shard_and_writes_no_marker(tmp_path, cli):
    db, shards, _ids = make_dataset(tmp_path, n_images=6, shard_size=2)
    tar = shards / "shard-00001.tar"
    with tarfile.open(tar) as tf:                       # cut after the first sample (2 members)
        cut_at = tf.getmembers()[2].offset
    _cut(tar, tar, cut_at)
    (shards / "shard-00001.parquet").unlink()           # no index: only the EOF check can tell
    work = tmp_path / "work"
    res = cli("enrich", "sharegpt4v", "--shards", str(shards), "--out", "sg", "--llm", "echo",
               "--work-dir", str(work), "--db", str(db))
    _one_line_error(res, "shard-00001.tar", "truncated")
    assert not (work / "shard-00001.done.json").exists()
    assert not (work / "shard-00001.jsonl").exists()
    assert "sg" not in _set_names(db)


def test_detect_over_a_truncated_shard_or_a_missing_annotations_file_is_one_line(tmp_path, cli):
    _db, shards, _ids = make_dataset(tmp_path, n_images=2, shard_size=2)
    _one_line_error(cli("detect", "--shards", str(shards), "--detector", "annotations",
                        "--annotations", str(tmp_path / "nope.json")), "nope.json", "no such")
    tar = shards / "shard-00000.tar"
    with tarfile.open(tar) as tf:                       # cut right after the last member
        last = tf.getmembers()[-1]
    _cut(tar, tar, last.offset_data + -(-last.size // 512) * 512)
    inst = tmp_path / "inst.jsonl"
    inst.write_text("".join(json.dumps({"image_id": i, "categories": ["dog"]}) + "\n"
                            for i in _ids))
    _one_line_error(cli("detect", "--shards", str(shards), "--detector", "annotations",
                        "--annotations", str(inst)), str(tar), "truncated")


@pytest.mark.parametrize("payload", [b"[" * 100_000 + b"]" * 100_000, b'["a", "list"]'],
                         ids=["100000-deep", "not-an-object"])
def test_odd_json_member_is_one_line_naming_the_sample(tmp_path, cli, payload):
    tar = tmp_path / "j.tar"
    with tarfile.open(tar, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in (("k.json", payload), ("k.txt", b"a cat")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    _one_line_error(cli("sets", "add", "j", str(tar), "--db", str(tmp_path / "r.duckdb")),
                    str(tar), "row 1", "sample 'k'")


# -- item 4: member size caps -----------------------------------------------------
@pytest.mark.skipif(not shutil.which("tar") or not shutil.which("truncate"),
                    reason="needs GNU tar and truncate to build a sparse tar")
def test_sparse_1500mb_member_is_refused_without_reading_it(tmp_path):
    (tmp_path / "sp").mkdir()
    subprocess.run(["truncate", "-s", "1500M", str(tmp_path / "sp" / "big.txt")], check=True)
    subprocess.run(["tar", "--sparse", "-cf", str(tmp_path / "sparse.tar"), "-C",
                    str(tmp_path / "sp"), "big.txt"], check=True)
    assert (tmp_path / "sparse.tar").stat().st_size < 100_000
    (tmp_path / "sp" / "big.txt").unlink()
    # measure the child's peak memory from a wrapper process of its own
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], "
               "capture_output=True, text=True); sys.stderr.write(r.stderr); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    db = tmp_path / "r.duckdb"
    t0 = time.time()
    res = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "capaudit.cli.main",
                          "sets", "add", "bomb", str(tmp_path / "sparse.tar"), "--db", str(db)],
                         env=_env(), capture_output=True, text=True, timeout=120)
    line = _one_line_error(res, "sparse.tar", "big.txt")
    assert "1572864000 bytes" in line and "4 MB" in line, line
    assert int(res.stdout.strip()) < 600_000, f"peak RSS {res.stdout.strip()} KB"  # was 9.4 GB
    assert time.time() - t0 < 60
    assert "bomb" not in _set_names(db)


def test_caption_member_cap_is_configurable(tmp_path, cli):
    tar = _text_tar(tmp_path / "t.tar", n=3, size=3000)
    db = tmp_path / "r.duckdb"
    line = _one_line_error(cli("sets", "add", "t", str(tar), "--db", str(db),
                                CAPAUDIT_TAR_TEXT_LIMIT_MB="0.002"), str(tar), "0.txt")
    assert "CAPAUDIT_TAR_TEXT_LIMIT_MB" in line
    assert cli("sets", "add", "t", str(tar), "--db", str(db),
                CAPAUDIT_TAR_TEXT_LIMIT_MB="0.003").returncode == 0
    bad = cli("sets", "add", "u", str(tar), "--db", str(db), CAPAUDIT_TAR_TEXT_LIMIT_MB="lots")
    _one_line_error(bad, "CAPAUDIT_TAR_TEXT_LIMIT_MB")


def test_image_members_have_their_own_larger_cap(tmp_path):
    from capaudit.io.image_shards import read_shard

    tar = tmp_path / "img.tar"
    with tarfile.open(tar, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in (("k.jpg", b"\xff" * 5000), ("k.txt", b"a cat")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    os.environ["CAPAUDIT_TAR_TEXT_LIMIT_MB"] = "0.001"   # 1000 bytes: the image is bigger
    try:
        [s] = list(read_shard(tar))
        assert len(s.image) == 5000 and s.captions == ["a cat"]
        os.environ["CAPAUDIT_TAR_IMAGE_LIMIT_MB"] = "0.004"
        with pytest.raises(InputError, match="k.jpg.*CAPAUDIT_TAR_IMAGE_LIMIT_MB"):
            list(read_shard(tar))
    finally:
        os.environ.pop("CAPAUDIT_TAR_TEXT_LIMIT_MB", None)
        os.environ.pop("CAPAUDIT_TAR_IMAGE_LIMIT_MB", None)


# -- item 3: enrichment markers keyed by the input ---------------------------------
def _ids_of(db: Path, name: str) -> list[int]:
    with Store(db, read_only=True) as store:
        return [r[0] for r in store.sql(
            "SELECT image_id FROM captions JOIN caption_sets USING (set_id) WHERE name = ? "
            "ORDER BY row_idx", [name])]


def test_rebuilt_shards_are_redone_not_reported_done(tmp_path, cli):
    from capaudit.io.ingest import add_caption_set
    from capaudit.enrich.shards_build import build_shards

    db, shards, ids = make_dataset(tmp_path, n_images=4, shard_size=2)
    work = tmp_path / "work"
    args = ["enrich", "sharegpt4v", "--shards", str(shards), "--out", "sg", "--llm", "echo",
            "--work-dir", str(work), "--db", str(db)]
    assert main(args) == 0
    assert _ids_of(db, "sg") == ids
    # rebuild the same folder from other images (ids 5000..5003), same shard names
    new_ids = [5000 + i for i in range(4)]
    folder = tmp_path / "images2"
    make_images(folder, 4)
    for old, new in zip(ids, new_ids):
        (folder / f"COCO_val2014_{old:012d}.jpg").rename(folder / f"COCO_val2014_{new:012d}.jpg")
    with Store(db) as store:
        add_caption_set(store, "coco2", make_captions(tmp_path / "c2.json", new_ids), "coco")
        table = store.captions("coco2")
    for p in shards.iterdir():
        p.unlink()
    build_shards(folder, table, shards, shard_size=2, set_name="coco2")
    assert main([*args, "--replace"]) == 0
    assert _ids_of(db, "sg") == new_ids                 # was: the old ids, "already done"
    marker = json.loads((work / "shard-00000.done.json").read_text())
    assert marker["input"]["sha256"] == __import__("hashlib").sha256(
        (shards / "shard-00000.tar").read_bytes()).hexdigest()
    # touching a shard without changing its bytes does not force a redo
    os.utime(shards / "shard-00000.tar", (1, 1))
    res = cli(*args, "--replace")
    assert res.returncode == 0 and "(shards run 0, already done 2)" in res.stdout, res.stdout
    assert _ids_of(db, "sg") == new_ids


# -- item 8: malformed replies from an OpenAI-compatible server --------------------
class ScriptedServer:
    """Loopback server whose reply to the n-th call is ``script[n]`` (then valid answers).

    A reply is ``("json", obj)``, ``("raw", status, content_type, bytes)``,
    ``("cut", bytes)`` (announces twice the length, sends ``bytes``, closes)
    or ``("hang",)`` (never answers).
    """

    def __init__(self, script=(), every=None):
        self.script, self.every, self.calls = list(script), every, 0
        self.headers: list[dict] = []
        self._lock, self.release = threading.Lock(), threading.Event()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv._lock:
                    n, srv.calls = srv.calls, srv.calls + 1
                    srv.headers.append(dict(self.headers))
                step = srv.every(body) if srv.every else (
                    srv.script[n] if n < len(srv.script) else None)
                if step is None:
                    text = answer_for(body["messages"])
                    step = ("json", {"choices": [{"message": {"content": text}}],
                                     "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
                if step[0] == "hang":
                    srv.release.wait(60)
                    return
                if step[0] == "json":
                    step = ("raw", 200, "application/json", json.dumps(step[1]).encode())
                if step[0] == "cut":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(2 * len(step[1])))
                    self.end_headers()
                    self.wfile.write(step[1])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                _, status, ctype, data = step
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _openai(url, **opts):
    return make_backend("openai", {"model": "m", "base_url": url, "backoff_s": 0.01,
                                   "max_retries": 3, "timeout_s": 5, **opts})


HTML = ("raw", 200, "text/html", b"<html><body>502 Bad Gateway (nginx)</body></html>")
LATIN1 = ("raw", 200, "application/json", '{"choices": "caf\xe9"}'.encode("latin-1"))
CUT = ("cut", b'{"choices": [{"message": {"content": "a do')
NO_CHOICES = ("json", {"object": "error", "message": "model overloaded"})
LIST_CONTENT = ("json", {"choices": [{"message": {"content": ["not", "a", "string"]}}]})


@pytest.mark.parametrize("bad", [HTML, LATIN1, CUT, NO_CHOICES, LIST_CONTENT],
                         ids=["html", "not-utf8", "truncated", "no-choices", "list-content"])
def test_malformed_200_reply_is_retried_then_succeeds(bad):
    with ScriptedServer([bad, bad]) as srv:
        b = _openai(srv.base_url)
        [res] = b.generate([GenRequest("Original caption: a dog\nfuse")])
    assert res.error is None and res.text.startswith("a dog (fused"), res
    assert srv.calls == 3 and b.stats.retries == 2 and b.stats.failures == 0


def test_endless_reply_is_not_read_into_memory(monkeypatch):
    import capaudit.llm.openai as openai_backend

    monkeypatch.setattr(openai_backend, "MAX_REPLY_BYTES", 1000)
    big = ("json", {"choices": [{"message": {"content": "x" * 5000}}]})
    with ScriptedServer([big, big]) as srv:
        [res] = _openai(srv.base_url, max_retries=1).generate([GenRequest("hi")])
    assert res.text is None and "over 1000 bytes" in res.error and srv.calls == 2


@pytest.mark.parametrize("retry_after", [-5, float("nan")])
def test_odd_retry_after_falls_back_to_our_backoff(retry_after):
    with FakeOpenAIServer(fail_first=1, fail_status=429, retry_after=retry_after) as srv:
        [res] = _openai(srv.base_url).generate([GenRequest("hello")])
    assert res.error is None and srv.calls == 2      # was: ValueError from time.sleep


def test_always_malformed_fails_that_sample_only_and_the_batch_goes_on():
    def every(body):
        return HTML if "bad" in body["messages"][-1]["content"] else None

    with ScriptedServer(every=every) as srv:
        b = _openai(srv.base_url, concurrency=3, max_retries=1)
        res = b.generate([GenRequest("Original caption: a cat"), GenRequest("bad one"),
                          GenRequest("Original caption: a cow")])
    assert res[0].text.startswith("a cat") and res[2].text.startswith("a cow")
    assert res[1].text is None and "not JSON" in res[1].error and "<html>" in res[1].error
    assert b.stats.failures == 1 and srv.calls == 4


def test_enrich_run_continues_past_malformed_replies_and_lists_them(tmp_path, cli):
    db, shards, ids = make_dataset(tmp_path, n_images=4, shard_size=2)
    with ScriptedServer(every=lambda body: HTML if body["messages"][-1]["content"][1][
            "image_url"]["url"].endswith(_b64_tail(tmp_path, ids[1])) else None) as srv:
        cfg = tmp_path / "fast-retries.yaml"
        cfg.write_text("llm:\n  options:\n    backoff_s: 0.01\n    max_retries: 2\n")
        res = cli("enrich", "sharegpt4v", "--shards", str(shards), "--out", "sg", "--llm",
                   "openai", "--model", "m", "--base-url", srv.base_url, "--work-dir",
                   str(tmp_path / "work"), "--config", str(cfg), "--db", str(db))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "failures 1" in res.stdout and "not JSON" in res.stdout
    assert _ids_of(db, "sg") == [i for i in ids if i != ids[1]]


def _b64_tail(tmp_path: Path, iid: int) -> str:
    import base64

    data = (tmp_path / "images" / f"COCO_val2014_{iid:012d}.jpg").read_bytes()
    return base64.b64encode(data).decode()[-40:]


# -- item 16: api-key-env and proxies ---------------------------------------------
def test_api_key_passed_as_env_name_is_refused_and_never_stored(tmp_path, cli):
    db, shards, _ids = make_dataset(tmp_path, n_images=2, shard_size=2)
    secret = "sk-proj-Abc123DEF456ghi789JKL"
    work = tmp_path / "work"
    with FakeOpenAIServer() as srv:
        res = cli("enrich", "sharegpt4v", "--shards", str(shards), "--out", "sg", "--llm",
                   "openai", "--model", "m", "--base-url", srv.base_url, "--api-key-env", secret,
                   "--work-dir", str(work), "--db", str(db))
        assert srv.calls == 0
    line = _one_line_error(res, "--api-key-env")
    assert secret not in line and secret not in res.stdout
    stored = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert not any(secret.encode() in data for data in stored)
    with Store(db, read_only=True) as store:
        assert store.sql("SELECT count(*) FROM runs")[0][0] == 0


def test_api_key_env_naming_an_unset_variable_is_refused(tmp_path, cli, monkeypatch):
    db, shards, _ids = make_dataset(tmp_path, n_images=2, shard_size=2)
    monkeypatch.delenv("CAPAUDIT_TEST_UNSET_KEY", raising=False)
    res = cli("enrich", "sharegpt4v", "--shards", str(shards), "--out", "sg", "--llm", "openai",
              "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "CAPAUDIT_TEST_UNSET_KEY",
              "--work-dir", str(tmp_path / "w"), "--db", str(db))
    _one_line_error(res, "CAPAUDIT_TEST_UNSET_KEY", "not set")


def test_loopback_requests_never_go_through_the_proxy(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sekret")
    with ScriptedServer() as proxy, ScriptedServer() as srv:
        for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
            monkeypatch.setenv(var, f"http://127.0.0.1:{proxy.httpd.server_address[1]}")
        for var in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(var, raising=False)
        for url in (srv.base_url, srv.base_url.replace("127.0.0.1", "localhost")):
            [res] = _openai(url, api_key_env="MY_KEY").generate([GenRequest("hi")])
            assert res.error is None, res.error
    assert proxy.calls == 0 and srv.calls == 2
    assert all(h.get("Authorization") == "Bearer sekret" for h in srv.headers)


# -- item 17: cache per answer, one enrich per work directory ----------------------
def test_answers_are_cached_as_they_arrive_so_a_kill_mid_batch_keeps_them(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with ScriptedServer([None, None, ("hang",)]) as srv:
        code = ("import sys; from capaudit.llm import GenRequest, make_backend; "
                f"b = make_backend('openai', {{'model': 'm', 'base_url': {srv.base_url!r}, "
                f"'concurrency': 1, 'timeout_s': 60}}, {str(cache)!r}); "
                "b.generate([GenRequest(f'p{i}') for i in range(3)])")
        proc = subprocess.Popen([sys.executable, "-c", code], env=_env())
        deadline = time.time() + 60
        while srv.calls < 3 and time.time() < deadline:
            assert proc.poll() is None
            time.sleep(0.02)
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    from capaudit.llm.cache import ResponseCache

    assert ResponseCache(cache).size() == 2   # was 0: the batch was written at its end


@pytest.mark.slow
def test_second_enrich_on_the_same_work_dir_is_refused(tmp_path, cli):
    db, shards, _ids = make_dataset(tmp_path, n_images=4, shard_size=2)
    work = tmp_path / "work"
    with FakeOpenAIServer(delay_s=1.5) as srv:     # the first run lasts about 6 s
        args = ["enrich", "sharegpt4v", "--shards", str(shards), "--out", "sg", "--llm",
                "openai", "--model", "m", "--base-url", srv.base_url, "--concurrency", "1",
                "--work-dir", str(work), "--db", str(db)]
        first = subprocess.Popen([sys.executable, "-m", "capaudit.cli.main", *args], env=_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while srv.calls == 0 and time.time() < deadline:
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.02)
        second = cli(*args)
        _one_line_error(second, str(work), "another capaudit run", str(first.pid))
        assert first.poll() is None, "the refusal must come while the first run is going"
        assert first.wait(timeout=60) == 0, first.stderr.read()
        first.stderr.close()
    assert srv.calls == 4                   # each image asked once: the second sent nothing
    assert _ids_of(db, "sg") == _ids


@pytest.mark.parametrize("case", ["work-dir-is-a-file", "cache-is-a-folder", "cache-not-sqlite"])
def test_unusable_work_dir_or_cache_is_one_line(tmp_path, cli, case):
    db, shards, _ids = make_dataset(tmp_path, n_images=2, shard_size=2)
    bad = tmp_path / "bad"
    if case == "cache-is-a-folder":
        bad.mkdir()
    else:
        bad.write_text('{"not": "sqlite"')
    where = ["--work-dir", str(bad)] if case.startswith("work") else \
        ["--work-dir", str(tmp_path / "w"), "--cache", str(bad)]
    res = cli("enrich", "sharegpt4v", "--shards", str(shards), "--out", "sg", "--llm", "echo",
              *where, "--db", str(db))
    _one_line_error(res, str(bad), "work directory" if case.startswith("work") else "cache")
    assert not list((tmp_path / "w").glob("*.done.json"))


# -- item 14: runs bookkeeping ----------------------------------------------------
def _runs(db: Path) -> list[tuple]:
    with Store(db, read_only=True) as store:
        return store.sql("SELECT run_id, status FROM runs ORDER BY run_id")


def _two_sets(tmp_path: Path) -> Path:
    db = tmp_path / "f.duckdb"
    src = tmp_path / "a.jsonl"
    src.write_text('{"image_id": 1, "caption": "a man rides a horse"}\n'
                   '{"image_id": 2, "caption": "a woman with a dog"}\n')
    for name in ("a", "b"):
        assert main(["sets", "add", name, str(src), "--db", str(db)]) == 0
    return db


@pytest.mark.slow
def test_rejected_filter_leaves_no_failed_run(tmp_path):
    db = _two_sets(tmp_path)
    # --out names an existing set
    assert main(["filter", "run", "a", "--filter", "gender-neutral", "--when", "always",
                 "--out", "b", "--db", str(db)]) == 2
    assert _runs(db) == []                               # was: a 'failed' row
    assert main(["filter", "run", "a", "--filter", "gender-neutral", "--when", "always",
                 "--out", "c", "--db", str(db)]) == 0
    assert [s for _, s in _runs(db)] == ["ok"]


@pytest.mark.slow
def test_caption_with_a_bad_model_leaves_no_failed_run(tmp_path):
    pytest.importorskip("transformers")
    db = _two_sets(tmp_path)
    (tmp_path / "badmodel").mkdir()
    (tmp_path / "badmodel" / "config.json").write_text("{}")
    shards = _text_tar(tmp_path / "t.tar", n=2)
    assert main(["caption", "--model", str(tmp_path / "badmodel"), "--shards", str(shards),
                 "--out", "c", "--db", str(db)]) == 2
    assert _runs(db) == []                               # was: a 'failed' row


def test_unexpected_failure_keeps_an_honest_failed_row(tmp_path):
    from capaudit.cli.common import recorded_run

    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(ZeroDivisionError):
            with recorded_run(store, {"x": 1}):
                1 / 0
        with pytest.raises(InputError):
            with recorded_run(store, {"x": 2}):
                raise InputError("bad row", row=3)
        with pytest.raises(KeyboardInterrupt):
            with recorded_run(store, {"x": 3}):
                raise KeyboardInterrupt
        assert [r[1] for r in store.sql("SELECT run_id, status FROM runs ORDER BY run_id")] == \
            ["failed", "interrupted"]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_run_of_a_killed_process_is_marked_killed_by_the_next_one(tmp_path):
    db = tmp_path / "k.duckdb"
    Store(db).close()
    code = ("import os, signal; from capaudit.store import Store; s = Store(%r); "
            "s.start_run('capaudit sets add x', {}, None, {}); s.con.execute('CHECKPOINT'); "
            "os.kill(os.getpid(), signal.SIGKILL)" % str(db))
    proc = subprocess.run([sys.executable, "-c", code], env=_env(), timeout=60)
    assert proc.returncode == -signal.SIGKILL
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import duckdb

        with duckdb.connect(str(db)) as con:   # a live run of another process stays 'running'
            con.execute("INSERT INTO runs (run_id, command, status, pid, host) VALUES "
                        "(99, 'live', 'running', ?, ?)", [sleeper.pid, socket.gethostname()])
        with Store(db, read_only=True) as store:
            assert store.sql("SELECT status FROM runs ORDER BY run_id") == \
                [("running",), ("running",)]
        with Store(db) as store:     # the next process that records a run finds the orphan
            new = store.start_run("capaudit filter run", {}, None, {})
            rows = store.sql("SELECT run_id, status, ended_at IS NULL FROM runs ORDER BY run_id")
        assert rows == [(1, "killed", True), (new, "running", True), (99, "running", True)]
    finally:
        sleeper.kill()
        sleeper.wait()
