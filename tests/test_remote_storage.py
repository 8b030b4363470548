"""Data where it lives (#32): s3:// and http(s):// through the one I/O layer, against real
services on 127.0.0.1 (moto's S3 server, an HTTP server answering byte ranges).

What would fail here: a URL turned into a path (``s3:/bucket``), a write that publishes a
truncated object, a listing of the whole bucket, a marker overwritten by a second writer,
a resumed run that redoes (or skips) the wrong shards, a credential in any output."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.cli.main import main
from capaudit.core.storage import fs as storage
from capaudit.core.storage.folder import Folder
from capaudit.core.storage.remote_write import Exists, open_output
from capaudit.core.storage.urls import expand_braces, join, name_of, parent_of
from capaudit.errors import InputError, MissingExtraError
from storage_servers import KEY_ID, SECRET, http_files, moto_endpoint, s3, subprocess_env  # noqa: F401
from test_hostile_shards import cli  # noqa: F401  (fixture: the CLI in-process)

METRICS = ["--metrics", "vocab,length,gender_error", "--n-boot", "50"]


def _rows(shared, n: int) -> list[dict]:
    path = shared("data", "captioners", "oscar_val2014_gender.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()[:n]]


def _parquet_shards(folder: Path, rows: list[dict], n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    step, out = -(-len(rows) // n), []
    for s in range(n):
        part = rows[s * step:(s + 1) * step]
        out.append(folder / f"shard-{s:05d}.parquet")
        pq.write_table(pa.table({"key": [str(r["image_id"]) for r in part],
                                 "caption": [r["caption"] for r in part]}), out[-1],
                       row_group_size=200)
    return out


def _tar_shard(path: Path, rows: list[dict]) -> Path:
    with tarfile.open(path, "w") as tf:
        for r in rows:
            data = r["caption"].encode()
            info = tarfile.TarInfo(f"{r['image_id']:012d}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _upload(s3, files: list[Path], prefix: str) -> None:
    for f in files:
        s3.put_file(f"{prefix}/{f.name}", f)


def _sets(doc: dict) -> dict:
    """The audit JSON without the set's name (the local and remote runs name it apart)."""
    return [v for k, v in sorted(doc["sets"].items())]


# -- text helpers: URLs are never paths -------------------------------------------------
def test_brace_lists_expand_in_the_pattern_order_with_their_padding():
    assert expand_braces("s3://b/shard-{00008..00011}.tar") == [
        "s3://b/shard-00008.tar", "s3://b/shard-00009.tar", "s3://b/shard-00010.tar",
        "s3://b/shard-00011.tar"]
    assert expand_braces("{train,val}-{0..1}.parquet") == [
        "train-0.parquet", "train-1.parquet", "val-0.parquet", "val-1.parquet"]
    assert expand_braces("x-{3..1}") == ["x-3", "x-2", "x-1"]
    assert expand_braces("plain::chained") == ["plain::chained"]   # '::' is not split here
    with pytest.raises(InputError, match="over 1,000,000 names"):
        expand_braces("s-{0..9999999}.tar")


def test_url_joins_and_names_never_lose_the_double_slash():
    assert join("s3://b/run/", "abc", "x.npz") == "s3://b/run/abc/x.npz"
    assert name_of("https://h/a/shard-1.tar?X-Amz-Signature=zz") == "shard-1.tar"
    assert parent_of("s3://b/a/x.tar") == "s3://b/a" and parent_of("s3://b/x") == "s3://b"
    assert str(Path("s3://b/x")) == "s3:/b/x"   # what pathlib does, and why it is never used


# -- reading: sets add, sharded audits --------------------------------------------------
def test_a_set_added_from_s3_is_the_local_file_and_names_its_url(shared, tmp_path, s3, cli):
    (f,) = _parquet_shards(tmp_path / "loc", _rows(shared, 400), 1)
    url = s3.put_file("caps/shard-00000.parquet", f)
    db = tmp_path / "s.duckdb"
    assert cli("sets", "add", "local", str(f), "--db", str(db)).returncode == 0
    res = cli("sets", "add", "remote", url, "--db", str(db))
    assert res.returncode == 0, res.stderr
    con = duckdb.connect(str(db), read_only=True)
    (a, sa, pa_), (b, sb, pb) = con.execute(
        "SELECT name, sha256, source_path FROM caption_sets ORDER BY name").fetchall()
    caps = [con.execute("SELECT list(caption ORDER BY row_idx) FROM captions c JOIN caption_sets s "
                        "USING (set_id) WHERE s.name = ?", [n]).fetchone()[0] for n in (a, b)]
    con.close()
    assert sa == sb and caps[0] == caps[1] and len(caps[0]) == 400
    assert pb == url and pa_ == str(f.resolve())
    missing = cli("sets", "add", "gone", s3.url("caps/nothing.parquet"), "--db", str(db))
    assert missing.returncode == 2 and "no such file or object" in missing.stderr
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def three_shards(tmp_path_factory):
    """Two parquet shards and a tar shard on local disk, and their audit's JSON (once)."""
    from tests.conftest import shared_path
    from capaudit.cli.main import main as run

    tmp = tmp_path_factory.mktemp("three")
    rows = _rows(shared_path, 900)
    files = _parquet_shards(tmp / "loc", rows[:600], 2) + \
        [_tar_shard(tmp / "loc" / "shard-00002.tar", rows[600:])]
    assert run(["audit", "run", "--shards", str(tmp / "loc"), *METRICS, "--json",
                str(tmp / "local.json"), "--db", str(tmp / "s.duckdb")]) == 0
    return files, json.loads((tmp / "local.json").read_text())


@pytest.mark.parametrize("form", ["folder", "glob", "braces", "manifest"])
def test_a_sharded_audit_from_s3_gives_the_json_of_the_local_shards(three_shards, tmp_path,
                                                                    s3, cli, form):
    files, local = three_shards
    _upload(s3, files, "laion")
    s3.put("laion-other/shard-00000.parquet", files[0].read_bytes())   # beside, never listed
    spec = {"folder": s3.url("laion/"), "glob": s3.url("laion/shard-*"),
            "braces": s3.url("laion/{shard-00000.parquet,shard-00001.parquet,shard-00002.tar}"),
            "manifest": s3.put("lists/laion.txt", b"../laion/shard-00000.parquet\n"
                               b"# a comment\n../laion/shard-00001.parquet\n" +
                               s3.url("laion/shard-00002.tar").encode() + b"\n")}[form]
    remote = cli("audit", "run", "--shards", spec, *METRICS, "--json", s3.url("out/a.json"),
                 "--work-dir", s3.url("work"), "--db", str(tmp_path / "s.duckdb"))
    assert remote.returncode == 0, remote.stderr
    assert _sets(json.loads(s3.cat("out/a.json"))) == _sets(local)
    assert "out/a.json.provenance.json" in s3.keys("out")
    assert s3.keys("work") == []    # removed after success: only what the run made


def test_glob_lists_under_the_fixed_prefix_only(s3, monkeypatch):
    import s3fs

    for i in range(3):
        s3.put(f"set/shard-{i}.parquet", b"x")
        s3.put(f"set/zzz-{i}.parquet", b"x")
    seen = []
    real = s3fs.S3FileSystem._lsdir

    async def spy(self, path, *args, prefix="", **kw):
        seen.append((path, prefix))
        return await real(self, path, *args, prefix=prefix, **kw)
    monkeypatch.setattr(s3fs.S3FileSystem, "_lsdir", spy)
    from capaudit.core.storage.listing import list_files

    got = [e.name for e in list_files(s3.url("set/shard-*.parquet"))]
    assert got == ["shard-0.parquet", "shard-1.parquet", "shard-2.parquet"]
    assert seen and all(p == "shard-" for _, p in seen), seen
    by_braces = list_files(s3.url("set/shard-{0..2}.parquet"))
    assert [e.name for e in by_braces] == got and all(e.identity.get("etag") for e in by_braces)
    with pytest.raises(InputError, match="no such object"):
        list_files(s3.url("set/shard-{0..3}.parquet"))


# -- writing: whole or nothing ------------------------------------------------------------
def test_a_plain_fsspec_write_that_raises_publishes_a_truncated_object(s3):
    """The pitfall (fsspec/s3fs #154), shown on this endpoint: why open_output exists."""
    fs = s3.fs
    with pytest.raises(RuntimeError):
        with fs.open(f"{s3.bucket}/naive.bin", "wb") as fh:
            fh.write(b"half of it")
            raise RuntimeError("the writer failed")
    assert s3.cat("naive.bin") == b"half of it"


@pytest.mark.parametrize("size", [1000, 12 * 2 ** 20])   # one part; three parts uploaded
@pytest.mark.parametrize("fault", [RuntimeError, KeyboardInterrupt])
def test_a_write_that_fails_midway_leaves_no_object_and_no_upload(s3, size, fault):
    url = s3.url(f"out/{size}.bin")
    with pytest.raises(fault):
        with open_output(url) as fh:
            fh.write(os.urandom(size))
            fh.flush()
            raise fault()
    assert s3.keys("out") == []
    uploads = s3.fs.call_s3("list_multipart_uploads", Bucket=s3.bucket).get("Uploads", [])
    assert uploads == []
    with open_output(url) as fh:   # and a clean block commits the whole object
        fh.write(b"a" * size)
    assert s3.fs.info(f"{s3.bucket}/out/{size}.bin")["size"] == size


@pytest.mark.parametrize("where", ["s3", "local"])
def test_markers_are_created_only_if_absent(s3, tmp_path, where):
    folder = Folder(s3.url("m") if where == "s3" else tmp_path / "m").make()
    folder.write_bytes("a.done.json", b"first", exclusive=True)
    with pytest.raises(Exists):
        folder.write_bytes("a.done.json", b"second", exclusive=True)
    assert folder.read_bytes("a.done.json") == b"first" and folder.names() == ["a.done.json"]
    folder.write_bytes("a.done.json", b"third")             # a plain write replaces
    assert folder.read_bytes("a.done.json") == b"third" and folder.read_bytes("b") is None


def test_http_is_read_only_and_not_listed(shared, tmp_path, http_files, cli):
    base, www = http_files
    files = _parquet_shards(www, _rows(shared, 300), 3)
    db = tmp_path / "s.duckdb"
    ok = cli("audit", "run", "--shards", f"{base}/shard-{{00000..00002}}.parquet", *METRICS,
             "--json", str(tmp_path / "h.json"), "--db", str(db))
    assert ok.returncode == 0, ok.stderr
    local = cli("audit", "run", "--shards", str(www), *METRICS, "--json",
                str(tmp_path / "l.json"), "--db", str(db))
    assert _sets(json.loads((tmp_path / "h.json").read_text())) == \
        _sets(json.loads((tmp_path / "l.json").read_text()))
    glob = cli("audit", "run", "--shards", f"{base}/*.parquet", *METRICS, "--db", str(db))
    assert glob.returncode == 2 and "cannot be listed" in glob.stderr
    out = cli("audit", "run", "--shards", str(www), *METRICS, "--json", f"{base}/o.json",
              "--db", str(db))
    assert out.returncode == 2 and "cannot write here" in out.stderr and len(files) == 3
    assert "Traceback" not in glob.stderr + out.stderr


# -- faults: retries, deadline, Ctrl-C, missing backends --------------------------------
def test_transient_faults_are_retried_and_others_are_one_line(monkeypatch):
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError(104, "Connection reset by peer")
        return "ok"
    assert storage.retrying(flaky, "s3://b/k") == "ok" and len(calls) == 3
    with pytest.raises(InputError, match="no such file or object"):
        storage.retrying(lambda: (_ for _ in ()).throw(FileNotFoundError("k")), "s3://b/k")
    monkeypatch.setenv(storage.DEADLINE_ENV, "0.5")
    t0 = time.monotonic()
    with pytest.raises(InputError, match=r"did not answer within 0.5 s"):
        storage.retrying(lambda: (_ for _ in ()).throw(TimeoutError("slow")), "s3://b/k")
    assert time.monotonic() - t0 < 3


def test_ctrl_c_ends_a_retry_wait_within_a_second(monkeypatch):
    monkeypatch.setenv(storage.DEADLINE_ENV, "600")
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        storage.retrying(lambda: (_ for _ in ()).throw(ConnectionError("down")), "s3://b/k")
    assert time.monotonic() - t0 < 1.5


def test_a_read_cut_midway_resumes_at_its_offset(s3):
    data = os.urandom(3 * 2 ** 20)
    url = s3.put("big.bin", data)
    fh = storage.open_input(url, block_size=2 ** 20)
    first = fh.read(1000)
    raw = fh.raw
    real, cut = raw._f.read, []

    def broken(n=-1):
        if not cut:
            cut.append(1)
            raise ConnectionResetError(104, "reset")
        return real(n)
    raw._f.read = broken   # the read after the buffer's first 1 MB is cut
    rest = fh.read()
    assert cut and first + rest == data


def test_a_missing_backend_names_its_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "s3fs" or m.startswith("s3fs.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "s3fs", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'capaudit\[s3\]'"):
        storage.filesystem("s3://bucket/key")


# -- resume after a kill, credentials nowhere ---------------------------------------------
def _audit_cmd(spec: str, work: str, out: str, db: Path) -> list[str]:
    return [sys.executable, "-m", "capaudit.cli.main", "audit", "run", "--shards", spec,
            *METRICS, "--work-dir", work, "--json", out, "--db", str(db), "--keep-work"]


def test_a_killed_audit_on_s3_resumes_and_no_credential_reaches_any_output(shared, tmp_path,
                                                                           s3, cli):
    files = _parquet_shards(tmp_path / "loc", _rows(shared, 4800), 12)
    _upload(s3, files, "set")
    env, db = subprocess_env(s3.env), tmp_path / "s.duckdb"
    cmd = _audit_cmd(s3.url("set/"), s3.url("work"), s3.url("out/r.json"), db)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not [k for k in s3.keys("work") if k.endswith(".done.json")]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    done = [k for k in s3.keys("work") if k.endswith(".done.json")]
    assert 1 <= len(done) < 12 and ".lock" in [name_of(k) for k in s3.keys("work")]
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(done)} resumed" in rerun.stdout.replace("\n", " "), rerun.stdout
    fresh = cli("audit", "run", "--shards", str(tmp_path / "loc"), *METRICS, "--json",
                str(tmp_path / "fresh.json"), "--db", str(tmp_path / "f.duckdb"))
    assert fresh.returncode == 0
    assert _sets(json.loads(s3.cat("out/r.json"))) == \
        _sets(json.loads((tmp_path / "fresh.json").read_text()))
    # every output of the run: stdout/stderr, the JSON and its provenance, the markers and
    # states kept in the work folder, the store's rows
    texts = [rerun.stdout, rerun.stderr] + [s3.cat(k).decode("latin-1") for k in
                                            s3.keys("out") + s3.keys("work")]
    con = duckdb.connect(str(db), read_only=True)
    texts += [str(r) for t in ("runs", "caption_sets", "metrics") for r in
              con.execute(f"SELECT * FROM {t}").fetchall()]
    con.close()
    assert all(SECRET not in t and KEY_ID not in t for t in texts)
    assert "[redacted]" not in s3.cat("out/r.json").decode()   # nothing else was masked


def test_credentials_in_urls_and_options_never_reach_a_message_or_the_store(tmp_path,
                                                                           http_files, cli):
    base, www = http_files
    (www / "caps.jsonl").write_text('{"image_id": 1, "caption": "A dog."}\n')
    db = tmp_path / "s.duckdb"
    signed = f"{base}/caps.jsonl?X-Amz-Credential={KEY_ID}%2Fus&X-Amz-Signature=deadbeef42"
    ok = cli("sets", "add", "signed", signed, "--db", str(db))
    assert ok.returncode == 0, ok.stderr
    gone = cli("sets", "add", "gone", signed.replace("caps.jsonl", "nope.jsonl"), "--db",
               str(db))
    assert gone.returncode == 2
    con = duckdb.connect(str(db), read_only=True)
    stored = str(con.execute("SELECT * FROM caption_sets").fetchall())
    con.close()
    for text in (stored, ok.stdout, gone.stderr):
        assert "deadbeef42" not in text and KEY_ID not in text and "[redacted]" in \
            (stored + gone.stderr)
    from capaudit.audit.shards.run import run_sharded

    with pytest.raises(InputError, match="hold credentials"):
        run_sharded(str(www), {"metrics": ["length"]}, None, tmp_path / "w",
                    storage_options={"key": KEY_ID, "secret": SECRET})


def test_an_audit_of_a_caption_file_and_annotations_on_s3(shared, tmp_path, s3, cli):
    c = shared("data", "coco2014")
    rows = _rows(shared, 300)
    caps = "".join(json.dumps({"image_id": r["image_id"], "caption": r["caption"]}) + "\n"
                   for r in rows)
    (tmp_path / "caps.jsonl").write_text(caps)
    url = s3.put("in/caps.jsonl", caps.encode())
    inst = s3.put_file("ann/instance_categories_val2014.jsonl",
                       c / "instance_categories_val2014.jsonl")
    db, args = tmp_path / "s.duckdb", ["--metrics", "chair_i,recall,length", "--n-boot", "50"]
    added = cli("annotations", "add", "instances", inst, "--db", str(db))
    assert added.returncode == 0, added.stderr
    cli("annotations", "add", "chair-gt", str(c / "chair_objects_trainval2014.jsonl"),
        "--db", str(db))
    remote = cli("audit", "run", url, *args, "--json", str(tmp_path / "r.json"), "--db", str(db))
    local = cli("audit", "run", str(tmp_path / "caps.jsonl"), *args, "--json",
                str(tmp_path / "l.json"), "--db", str(db))
    assert remote.returncode == 0 and local.returncode == 0, remote.stderr + local.stderr
    r, lo = (json.loads((tmp_path / n).read_text()) for n in ("r.json", "l.json"))
    assert _sets(r) == _sets(lo) and list(r["sets"]) == ["caps"]
    assert r["sets"]["caps"]["recall"]["n"] > 0      # the instances read from s3:// joined
    con = duckdb.connect(str(db), read_only=True)
    (src, ns), = con.execute("SELECT path, namespace FROM annotation_sources WHERE kind = "
                             "'instances'").fetchall()
    con.close()
    assert src == inst and ns == "coco2014"   # named by its URL, namespace from its name


def test_enrich_reads_shards_on_s3_and_keeps_its_work_there(tmp_path, s3, monkeypatch):
    """The same outputs, byte for byte, as from local shards into a local work folder; a
    rerun finds every shard done by its ETag; the manifest names the parent set."""
    from capaudit.enrich.runner import run_enrich
    from capaudit.io.image_shards import read_manifest
    from test_enrich_fixtures import base_config, make_dataset

    _, shards, _ = make_dataset(tmp_path, n_images=6, shard_size=2)
    for f in sorted(shards.iterdir()):
        s3.put_file(f"shards/{f.name}", f)
    cfg = {**base_config(backend="echo"), "captions": "all"}
    local = run_enrich(shards, tmp_path / "w", "capsfusion", cfg)
    remote = run_enrich(s3.url("shards/"), s3.url("enrich"), "capsfusion", cfg)
    assert local["table"].equals(remote["table"]) and remote["table"].num_rows == 12
    outs = sorted(k for k in s3.keys("enrich") if k.endswith(".jsonl"))
    assert [name_of(k) for k in outs] == sorted(p.name for p in (tmp_path / "w").glob("*.jsonl"))
    assert all(s3.cat(k) == (tmp_path / "w" / name_of(k)).read_bytes() for k in outs)
    import capaudit.executors as executors

    starts, start = [], executors.get_executor
    monkeypatch.setattr(executors, "get_executor", lambda *a, **kw: starts.append(a) or start(
        *a, **kw))
    again = run_enrich(s3.url("shards/shard-{00000..00002}.tar"), s3.url("enrich"),
                       "capsfusion", cfg)
    assert again["shards_run"] == 0 and again["shards_skipped"] == 3
    assert starts == [] and again["table"].equals(remote["table"])   # nothing left: no executor
    assert read_manifest(s3.url("shards/"))["captions_set"] == "coco"


def test_exports_and_reports_are_uploaded_whole(shared, tmp_path, s3, cli):
    rows = _rows(shared, 200)
    db = tmp_path / "s.duckdb"
    for name, part in (("a", rows[:100]), ("b", rows[100:])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(
            {"image_id": r["image_id"], "caption": r["caption"]}) + "\n" for r in part))
        assert cli("sets", "add", name, str(tmp_path / f"{name}.jsonl"), "--db",
                   str(db)).returncode == 0
    assert cli("sets", "export", "a", "--to", "jsonl", "--out", str(tmp_path / "a.out.jsonl"),
               "--db", str(db)).returncode == 0
    res = cli("sets", "export", "a", "--to", "jsonl", "--out", s3.url("exp/a.jsonl"), "--db",
              str(db))
    assert res.returncode == 0, res.stderr
    assert s3.cat("exp/a.jsonl") == (tmp_path / "a.out.jsonl").read_bytes()
    assert "exp/a.jsonl.provenance.json" in s3.keys("exp")
    wds = cli("sets", "export", "a", "--to", "webdataset", "--out", s3.url("exp/wds"), "--db",
              str(db))
    assert wds.returncode == 0, wds.stderr
    assert any(k.endswith(".tar") for k in s3.keys("exp/wds/"))
    again = cli("sets", "export", "b", "--to", "webdataset", "--out", s3.url("exp/wds"),
                "--db", str(db))
    assert again.returncode == 2 and "has objects in it" in again.stderr
    rep = cli("audit", "compare", "a", "b", "--metrics", "length,vocab", "--n-boot", "20",
              "--report", s3.url("rep"), "--db", str(db))
    assert rep.returncode == 0, rep.stderr
    assert {"rep/report.md", "rep/report.html", "rep/metrics.json",
            "rep/provenance.json"} <= set(s3.keys("rep"))
    assert b"# capaudit compare report" in s3.cat("rep/report.md")


def test_hf_urls_resolve_to_the_hub_file_system_and_are_read_only(tmp_path, cli):
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import HfFileSystem

    fs, path = storage.filesystem("hf://datasets/org/name/data/train-00000.parquet")
    assert isinstance(fs, HfFileSystem) and path == "datasets/org/name/data/train-00000.parquet"
    res = cli("sets", "export", "x", "--to", "jsonl", "--out", "hf://datasets/org/name/x.jsonl",
              "--db", str(tmp_path / "none.duckdb"))
    assert res.returncode == 2 and "Traceback" not in res.stderr


@pytest.mark.skipif(not os.environ.get("CAPAUDIT_TEST_HUB"),
                    reason="no Hugging Face Hub here (an offline machine); set "
                           "CAPAUDIT_TEST_HUB=hf://datasets/ORG/NAME/PATH/*.parquet (caption "
                           "shards) where huggingface.co is reachable")
def test_the_readme_hf_example_audits_caption_shards_on_the_hub(tmp_path, cli):
    """The README's ``hf://`` example, against the Hub named by ``CAPAUDIT_TEST_HUB``."""
    spec = os.environ["CAPAUDIT_TEST_HUB"]
    res = cli("audit", "run", "--shards", spec, "--metrics", "vocab,length", "--n-boot", "20",
              "--name", "hub", "--json", str(tmp_path / "hf.json"), "--db",
              str(tmp_path / "s.duckdb"))
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "hf.json").read_text())["sets"]["hub"]["length"]["n"] > 0


def test_a_remote_parquet_shard_is_read_by_its_needed_columns_only(shared, tmp_path,
                                                                    http_files):
    """Footer first, then the id and caption columns' byte ranges: a 4 MB column of
    anything else in the shard is never fetched."""
    from capaudit.io.caption_shards import iter_shard_rows
    from storage_servers import SERVED

    base, www = http_files
    rows = _rows(shared, 2000)
    table = pa.table({"key": [str(r["image_id"]) for r in rows],
                      "caption": [r["caption"] for r in rows],
                      "clip_embedding": [os.urandom(2048) for _ in rows]})
    pq.write_table(table, www / "wide.parquet", row_group_size=250, compression="none")
    size = (www / "wide.parquet").stat().st_size
    got = list(iter_shard_rows(f"{base}/wide.parquet"))
    assert got == list(iter_shard_rows(www / "wide.parquet")) and len(got) == 2000
    fetched = sum(n for name, n in SERVED if name == "wide.parquet")
    assert size > 4_000_000 and fetched < 0.1 * size, (fetched, size)


def test_a_work_folder_on_s3_is_held_by_one_run_and_a_dead_holder_is_taken_over(s3):
    from capaudit.core.storage.work_folder import LOCK_NAME, STALE_S, remote_lock

    folder = Folder(s3.url("w"))
    fresh = {"host": "other-host", "pid": 4242, "token": "t", "beat": time.time()}
    folder.write_bytes(LOCK_NAME, json.dumps(fresh).encode())
    with pytest.raises(InputError, match=r"another capaudit run \(host other-host, pid 4242\)"):
        with remote_lock(s3.url("w")):
            pass
    assert json.loads(folder.read_bytes(LOCK_NAME))["token"] == "t"     # left as it was
    folder.write_bytes(LOCK_NAME, json.dumps({**fresh, "beat": time.time() - STALE_S - 1})
                       .encode())
    with remote_lock(s3.url("w")):   # its heartbeat stopped: a run killed elsewhere
        held = json.loads(folder.read_bytes(LOCK_NAME))
        assert held["pid"] == os.getpid() and held["token"] != "t"
        with pytest.raises(InputError, match="another capaudit run"):
            with remote_lock(s3.url("w")):   # and now it is ours: a second run is refused
                pass
    assert folder.read_bytes(LOCK_NAME) is None      # released at the end


def test_local_paths_never_import_fsspec(tmp_path):
    """fsspec costs ~0.1 s to import and s3fs ~0.8 s: a run on local paths pays neither."""
    (tmp_path / "set").mkdir()
    pq.write_table(pa.table({"key": ["1", "2"], "caption": ["A dog.", "A cat."]}),
                   tmp_path / "set" / "a.parquet")
    (tmp_path / "c.jsonl").write_text('{"image_id": 1, "caption": "A dog."}\n')
    probe = f"""
import sys
from capaudit.cli.main import main
db = {str(tmp_path / 's.duckdb')!r}
assert main(["sets", "add", "c", {str(tmp_path / 'c.jsonl')!r}, "--db", db]) == 0
assert main(["audit", "run", "--shards", {str(tmp_path / 'set')!r}, "--metrics", "length",
             "--n-boot", "10", "--json", {str(tmp_path / 'o.json')!r}, "--db", db]) == 0
print("LOADED", [m for m in ("fsspec", "s3fs", "gcsfs", "aiohttp", "huggingface_hub")
                 if m in sys.modules])
"""
    out = subprocess.run([sys.executable, "-c", probe], env=subprocess_env(), text=True,
                         capture_output=True, timeout=300)
    assert "LOADED []" in out.stdout, out.stdout + out.stderr


def test_an_object_rewritten_under_its_name_is_audited_again(shared, tmp_path, s3, cli):
    """Markers keep the store's identity of each input (ETag, size): a rerun resumes the
    unchanged shards and redoes the one whose object was replaced."""
    files = _parquet_shards(tmp_path / "loc", _rows(shared, 600), 3)
    _upload(s3, files, "set")
    args = ["audit", "run", "--shards", s3.url("set/"), *METRICS, "--work-dir",
            s3.url("work"), "--keep-work", "--db", str(tmp_path / "s.duckdb")]
    assert cli(*args).returncode == 0
    again = cli(*args)
    assert "0 audited, 3 resumed" in " ".join(again.stdout.split())
    s3.put("set/shard-00001.parquet", files[0].read_bytes())   # other captions, same name
    third = cli(*args)
    assert "1 audited, 2 resumed" in " ".join(third.stdout.split()), third.stdout
