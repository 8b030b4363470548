"""Errors about a remote input name what the user gave, and say what the store answered (i5s).

1. A reader that needs a path reads a URL's private temporary copy
   (:func:`capaudit.core.storage.paths.as_local`); its errors named that copy
   (``/tmp/capaudit-remote-x1y2/bad.jsonl, row 2: ...``), a path that tells the user nothing
   and is gone when the message is read. ``as_local`` now rewrites a capaudit error raised in
   its block to name the URL: the same class, row and fix, the same words as for the same
   file on disk (a local path's message is untouched); ``audit run``'s copy, kept for the
   process and read lazily, has its errors rewritten as it is read.
2. fsspec's http file system reports a 401/403 (and a 5xx) on ``info`` as a
   ``FileNotFoundError``: a refused file read "no such file or object", and a probe for an
   annotations file said "no such annotations file". A refusal is now one line saying access
   was refused (never retried); a missing file still says so; a 5xx is retried until
   ``CAPAUDIT_IO_DEADLINE_S`` (300 s by default, documented in docs/scale.md) and then says
   the store did not answer, with its status.
"""

from __future__ import annotations

import http.server
import threading

import pytest

from storage_servers import QuietHTTPServer, moto_endpoint, s3  # noqa: F401

BAD_ROWS = b'{"image_id": 1, "caption": "a dog"}\n{"image_id": 2, "caption": \n'


@pytest.fixture
def memory_files():
    """``put(name, data) -> URL`` on fsspec's in-memory file system, emptied afterwards."""
    fsspec = pytest.importorskip("fsspec")
    fs, root = fsspec.filesystem("memory"), "/i5s-errors"

    def put(name: str, data: bytes) -> str:
        fs.pipe_file(f"{root}/{name}", data)
        return f"memory:/{root}/{name}"
    yield put
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _cli(capsys, *args) -> tuple[int, str]:
    from capaudit.cli.main import main

    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def _same_error_for_url_and_path(capsys, tmp_path, url: str, local, *args) -> str:
    """The CLI's error for ``url`` and for the same bytes at ``local``: the same line with
    the URL in the path's place, exit 2 both."""
    code_r, err_r = _cli(capsys, *args, url, "--db", tmp_path / "r.duckdb")
    code_l, err_l = _cli(capsys, *args, local, "--db", tmp_path / "l.duckdb")
    assert code_r == code_l == 2, (err_r, err_l)
    assert err_r.count("\n") == 1 and "Traceback" not in err_r, err_r
    assert "capaudit-remote" not in err_r and "/tmp/" not in err_r, err_r
    assert err_r.replace(url, str(local)) == err_l, (err_r, err_l)
    return err_r


def test_sets_add_of_a_bad_row_on_memory_names_the_url_and_row(tmp_path, capsys,
                                                               memory_files):
    url = memory_files("bad.jsonl", BAD_ROWS)
    (tmp_path / "bad.jsonl").write_bytes(BAD_ROWS)
    err = _same_error_for_url_and_path(capsys, tmp_path, url, tmp_path / "bad.jsonl",
                                       "sets", "add", "x")
    assert err.startswith(f"capaudit: error: {url}, row 2: malformed JSON"), err


def test_annotations_add_of_a_bad_file_on_memory_names_the_url(tmp_path, capsys,
                                                               memory_files):
    url = memory_files("inst.json", b'{"annotations": [}')
    (tmp_path / "inst.json").write_bytes(b'{"annotations": [}')
    err = _same_error_for_url_and_path(capsys, tmp_path, url, tmp_path / "inst.json",
                                       "annotations", "add", "instances")
    assert err.startswith(f"capaudit: error: {url}: malformed JSON"), err


@pytest.mark.parametrize("bad", [BAD_ROWS, BAD_ROWS.replace(b'"caption": \n', b'"caption": 5}\n')])
def test_audit_run_of_a_bad_caption_file_on_memory_names_the_url(bad, tmp_path, capsys,
                                                                 memory_files):
    """``audit run`` keeps its copy for the process (read twice: coverage, then the audit),
    read lazily: its errors are named as it is read."""
    name = f"caps{len(bad)}.jsonl"   # a URL's copy is kept for the process: one name each
    url = memory_files(name, bad)
    (tmp_path / name).write_bytes(bad)
    err = _same_error_for_url_and_path(capsys, tmp_path, url, tmp_path / name,
                                       "audit", "run", "--metrics", "length")
    assert err.startswith(f"capaudit: error: {url}, row 2: "), err


def test_as_local_keeps_the_class_row_and_fix_and_leaves_a_path_alone(tmp_path,
                                                                      memory_files):
    from capaudit.core.storage.paths import as_local
    from capaudit.errors import DataError

    url = memory_files("x.jsonl", b"{}\n")
    with pytest.raises(DataError) as caught:
        with as_local(url) as (copy, shown):
            assert shown == url and copy.name == "x.jsonl" and str(copy) != url
            raise DataError("bad row", path=copy, row=3, fix=f"repair {copy}")
    got = caught.value
    assert type(got) is DataError and got.row == 3 and got.path == url, got
    assert got.fix == f"repair {url}"
    assert str(got) == str(DataError("bad row", path=url, row=3, fix=f"repair {url}"))
    local = tmp_path / "x.jsonl"
    local.write_bytes(b"{}\n")
    mine = DataError("bad row", path=local, row=3, fix="repair it")
    with pytest.raises(DataError) as caught:
        with as_local(str(local)) as (copy, shown):
            assert copy == local and shown is None
            raise mine
    assert caught.value is mine and str(mine) == f"{local}, row 3: bad row (fix: repair it)"


def test_the_annotations_detector_on_s3_names_the_url_with_the_local_class(tmp_path,
                                                                           s3):  # noqa: F811
    """Its old rewrite (``InputError(str(exc).replace(...))``) lost the class and the row."""
    from capaudit.enrich.detectors.annotations import AnnotationDetector
    from capaudit.errors import CapauditError

    bad = b'{"image_id": 1, "categories": ["dog"]}\n{"image_id": 2, "categories": [\n'
    local = tmp_path / "inst.jsonl"
    local.write_bytes(bad)
    url = s3.put("in/inst.jsonl", bad)
    with pytest.raises(CapauditError) as here:
        AnnotationDetector(str(local))
    with pytest.raises(CapauditError) as there:
        AnnotationDetector(url)
    assert type(there.value) is type(here.value)
    assert getattr(there.value, "row", None) == getattr(here.value, "row", None)
    assert str(there.value) == str(here.value).replace(str(local), url), there.value
    assert str(there.value).startswith(url) and "/tmp/" not in str(there.value)


def test_an_evidence_file_on_memory_names_the_url(tmp_path, memory_files):
    from capaudit.errors import CapauditError
    from capaudit.filters.shards.evidence_file import convert_here

    url = memory_files("gt.jsonl", b'{"image_id": 1, "objects": ["dog"]}\n{"image_id": \n')
    with pytest.raises(CapauditError) as caught:
        convert_here("chair-gt", url, str(tmp_path / "ev"))
    text = str(caught.value)
    assert text.startswith(url) and "capaudit-remote" not in text, text


# -- what the store answered ------------------------------------------------------------
class _Answers(http.server.BaseHTTPRequestHandler):
    """Every request for /CODE/... answered with HTTP CODE; each request counted."""

    asked: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def _answer(self, body: bool) -> None:
        type(self).asked.append(self.path)
        code = int(self.path.split("/")[1])
        self.send_response(code)
        self.send_header("Content-Length", "4")
        self.end_headers()
        if body:
            self.wfile.write(b"nope")

    def do_GET(self) -> None:
        self._answer(True)

    def do_HEAD(self) -> None:
        self._answer(False)


@pytest.fixture
def answering():
    """The base URL of a server on 127.0.0.1 that answers /403/x with a 403, and so on."""
    pytest.importorskip("aiohttp")
    _Answers.asked = []
    server = QuietHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_input_says_access_was_refused_at_once(code, tmp_path, capsys, answering,
                                                         monkeypatch):
    monkeypatch.setenv("CAPAUDIT_IO_DEADLINE_S", "30")   # a retry would be seen in `asked`
    url = f"{answering}/{code}/caps.jsonl"
    rc, err = _cli(capsys, "sets", "add", "x", url, "--db", tmp_path / "db.duckdb")
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"capaudit: error: {url}: cannot read here: access refused "
                          f"(HTTP {code}: denied, or no credentials)"), err
    assert "check the credentials" in err and "no such file" not in err, err
    assert len(_Answers.asked) <= 2, _Answers.asked   # never retried


def test_a_refused_annotations_file_is_not_called_missing(answering, monkeypatch):
    from capaudit.enrich.detectors.annotations import AnnotationDetector
    from capaudit.errors import AccessRefused

    monkeypatch.setenv("CAPAUDIT_IO_DEADLINE_S", "30")
    url = f"{answering}/403/inst.json"
    with pytest.raises(AccessRefused, match="access refused") as caught:
        AnnotationDetector(url)
    assert str(caught.value).startswith(url) and len(_Answers.asked) <= 2
    with pytest.raises(Exception, match="no such annotations file"):
        AnnotationDetector(f"{answering}/404/inst.json")


def test_a_missing_file_and_a_failing_server_say_so(tmp_path, capsys, answering,
                                                    monkeypatch):
    from capaudit.core.storage.paths import open_binary
    from capaudit.errors import InputError, StoreFault

    monkeypatch.setenv("CAPAUDIT_IO_DEADLINE_S", "0.5")
    gone = f"{answering}/404/caps.jsonl"
    with pytest.raises(InputError, match="no such file or object") as caught:
        open_binary(gone)
    assert not isinstance(caught.value, StoreFault)
    busy = f"{answering}/503/caps.jsonl"
    with pytest.raises(StoreFault, match=r"did not answer within 0.5 s \(HTTP 503\)"):
        open_binary(busy)
    assert sum(p.startswith("/503/") for p in _Answers.asked) > 2   # retried


def test_an_s3_refusal_is_named_as_one(monkeypatch):
    """s3fs turns AccessDenied into ``PermissionError``; botocore's own error says it."""
    from capaudit.core.storage.fs import io_error, is_missing
    from capaudit.errors import AccessRefused

    class ClientError(Exception):
        pass
    for exc in (PermissionError("Access Denied"),
                ClientError("An error occurred (AccessDenied) when calling GetObject")):
        err = io_error(exc, "s3://AKIAXXXX:secret@b/k.jsonl")
        assert isinstance(err, AccessRefused) and "access refused" in str(err), err
        assert "secret" not in str(err)
    missing = FileNotFoundError("b/k.jsonl")
    assert is_missing(missing) and not isinstance(io_error(missing, "s3://b/k"), AccessRefused)


def test_a_missing_object_whose_name_holds_a_refusal_word_is_missing(memory_files):
    """A missing object's error holds its own path: ``memory://b/Forbidden/x.jsonl`` was
    'access refused' (the word matched in the user's name), and every probe failed."""
    from capaudit.core.storage.paths import file_size, is_file

    for url in ("memory://b/Forbidden/caps.jsonl", "memory://b/AccessDenied.jsonl"):
        assert file_size(url) is None and not is_file(url)


def test_an_s3_403_probe_reads_as_absent_an_http_403_as_refused(answering, monkeypatch):
    """S3 answers 403 for a missing key to a caller without s3:ListBucket (s3fs: a
    ``PermissionError``, no status): a probe reads it as absent, as it always did, so an
    output is still written with least-privilege credentials; an HTTP server's 403 is a
    refusal."""
    from capaudit.core.storage import folder as folder_mod
    from capaudit.core.storage.paths import file_size
    from capaudit.errors import AccessRefused

    monkeypatch.setenv("CAPAUDIT_IO_DEADLINE_S", "30")
    with pytest.raises(AccessRefused):
        file_size(f"{answering}/403/caps.jsonl")

    def denied(read):
        raise PermissionError("Access Denied")
    monkeypatch.setattr(folder_mod, "_or_none", denied)
    assert file_size("memory://b/out/caps.jsonl") is None
