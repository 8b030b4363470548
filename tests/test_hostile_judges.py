"""Hostile judge and LLM servers (issue #25), against the loopback server only: a 401
that quotes the request's Authorization header, answers of 100,000 nested brackets, a
20 MB answer, impossible usage figures, a reply dripped a byte at a time. The key never
reaches an error line or a file; each reply is parsed in its own guard; sizes, usage and
time are bounded."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from capaudit.cli.main import main
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.llm import GenRequest, make_backend

KEY = "sk-test-0123456789abcdefSECRET"


@pytest.fixture(autouse=True)
def _own_cwd(tmp_path, monkeypatch):
    """The default response cache lives in the user cache dir: one per test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JUDGE_KEY", KEY)


def _files(tmp_path: Path):
    caps, refs = tmp_path / "m.jsonl", tmp_path / "h.jsonl"
    caps.write_text("".join(json.dumps(x) + "\n" for x in [
        {"image_id": 1, "caption": "A purple horse stands. It is beautiful."},
        {"image_id": 2, "caption": "A horse eats grass."}]))
    refs.write_text("".join(json.dumps(x) + "\n" for x in [
        {"image_id": 1, "caption": "A brown horse stands."},
        {"image_id": 2, "caption": "A horse eats hay."}]))
    from PIL import Image

    (tmp_path / "img").mkdir(exist_ok=True)
    for i in (1, 2):
        Image.new("RGB", (8, 8), (i, 80, 160)).save(tmp_path / "img" / f"{i}.jpg", "JPEG")
    return caps, refs


def _command(name, caps, refs, tmp_path, url):
    evidence = {"capscore": ["--reference", refs],
                "dcscore": ["--reference", refs, "--images", tmp_path / "img"],
                "factuality": ["--evidence", "reference-captions", "--reference", refs],
                "faithscore": ["--images", tmp_path / "img"]}[name]
    return [str(a) for a in ["audit", name, caps, *evidence, "--judge-url", url,
                             "--api-key-env", "JUDGE_KEY", "--n-boot", 10,
                             "--json", tmp_path / f"{name}.json", "--db", tmp_path / "j.duckdb"]]


JUDGED = ["capscore", "dcscore", "factuality", "faithscore"]


@pytest.mark.parametrize("name", JUDGED)
def test_401_echoing_the_authorization_header_is_redacted(tmp_path, capsys, name):
    caps, refs = _files(tmp_path)
    with FakeOpenAIServer(answer=lambda b: {"echo_headers": True, "status": 401}) as srv:
        code = main(_command(name, caps, refs, tmp_path, srv.base_url))
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "HTTP 401" in lines[0], err
    assert KEY not in err and "sk-test" not in err and "[redacted]" in err, err


@pytest.mark.parametrize("name", ["capability", "validate"])
def test_401_echo_is_redacted_in_capability_and_judge_validate(tmp_path, capsys, name):
    """The other two of the six judge commands, with their own inputs."""
    caps, _ = _files(tmp_path)
    if name == "capability":
        ann = tmp_path / "elements.jsonl"
        ann.write_text("".join(json.dumps({"image_id": i, "dimension": "object_color",
                                           "element": "the horse is brown"}) + "\n"
                               for i in (1, 2)))
        args = ["audit", "capability", caps, "--annotations", ann]
    else:
        labels = tmp_path / "labels.jsonl"
        labels.write_text("".join(json.dumps({"image_id": i, "caption": "A horse eats grass.",
                                              "sentence_idx": 0, "label": "yes"}) + "\n"
                                  for i in (1, 2)))
        args = ["judge", "validate", "--labels", labels]
    with FakeOpenAIServer(answer=lambda b: {"echo_headers": True, "status": 401}) as srv:
        code = main([str(a) for a in [*args, "--images", tmp_path / "img", "--judge-url",
                                      srv.base_url, "--api-key-env", "JUDGE_KEY", "--n-boot",
                                      10, "--db", tmp_path / "j.duckdb"]])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "HTTP 401" in lines[0], err
    assert KEY not in err and "sk-test" not in err and "[redacted]" in err, err


def test_enrich_failures_and_markers_never_hold_the_key(tmp_path):
    from test_enrich_fixtures import base_config, make_dataset

    from capaudit.enrich.runner import run_enrich

    _, shards, _ = make_dataset(tmp_path, n_images=3, shard_size=2)
    with FakeOpenAIServer(answer=lambda b: {"echo_headers": True, "status": 401}) as srv:
        cfg = base_config(srv.base_url)
        cfg["llm"]["options"]["api_key_env"] = "JUDGE_KEY"
        s = run_enrich(shards, tmp_path / "w", "sharegpt4v", cfg)
    assert srv.calls == 3 and len(s["failures"]) == 3  # one per image, 401 is not retried
    written = [p for p in (tmp_path / "w").rglob("*") if p.is_file()]
    markers = [p for p in written if p.name.endswith(".done.json")]
    assert len(markers) == 2 and (tmp_path / "w" / "failures.jsonl") in written
    for p in written:
        assert "sk-test" not in p.read_text(errors="replace"), p
    assert all("[redacted]" in f["error"] for f in s["failures"])


NESTED = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("name", ["capscore", "dcscore", "faithscore"])
def test_100000_nested_brackets_are_unparsed_not_an_abort(tmp_path, capsys, name):
    caps, refs = _files(tmp_path)
    with FakeOpenAIServer(answer=lambda b: NESTED) as srv:
        code = main(_command(name, caps, refs, tmp_path, srv.base_url))
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = " ".join(out.split())
    assert "unparsed" in summary and "failed 0" in summary, summary
    assert srv.calls >= 2


def _backend(srv, **opts):
    return make_backend("openai", {"model": "m", "base_url": srv.base_url, "backoff_s": 0.01,
                                   "max_retries": 2, **opts})


def test_nested_json_body_fails_that_request_only():
    nested = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with FakeOpenAIServer(answer=lambda b: {"raw": nested} if "bad" in
                          b["messages"][-1]["content"] else "fine") as srv:
        b = _backend(srv, concurrency=2)
        good, bad = b.generate([GenRequest("good one"), GenRequest("bad one")])
    assert good.error is None and good.text == "fine"
    assert bad.text is None and "nested too deeply" in bad.error


def test_20_mb_answer_is_refused_with_a_status_not_stored(tmp_path):
    huge = "x" * 20_000_000
    with FakeOpenAIServer(answer=lambda b: huge) as srv:
        b = make_backend("openai", {"model": "m", "base_url": srv.base_url, "max_retries": 2},
                         tmp_path / "cache.sqlite")
        [res] = b.generate([GenRequest("describe")])
    assert res.text is None and "reply over 4000000 bytes refused" in res.error
    assert srv.calls == 3 and b.stats.failures == 1   # retried like any malformed reply
    assert (tmp_path / "cache.sqlite").stat().st_size < 1_000_000


def test_answer_over_the_character_limit_is_refused():
    with FakeOpenAIServer(answer=lambda b: "word " * 60_000) as srv:  # 300,000 chars, 300 KB
        [res] = _backend(srv, max_retries=0).generate([GenRequest("describe")])
    assert res.text is None and "over the 200,000 limit" in res.error


@pytest.mark.parametrize("usage", [{"prompt_tokens": -10**9, "completion_tokens": 5},
                                   {"prompt_tokens": 10**12, "completion_tokens": 10**12},
                                   {"prompt_tokens": 7, "completion_tokens": 2.5},
                                   {"prompt_tokens": "12", "completion_tokens": True}])
def test_impossible_usage_is_not_summed(usage):
    with FakeOpenAIServer(answer=lambda b: {"content": "yes", "usage": usage}) as srv:
        b = _backend(srv)
        [res] = b.generate([GenRequest("is it?")])
    assert res.text == "yes" and res.bad_usage
    assert b.stats.usage_ignored == 1
    assert 0 <= b.stats.tokens_in <= 7 and 0 <= b.stats.tokens_out <= 5


def test_impossible_usage_is_said_in_the_judge_summary(tmp_path, capsys):
    caps, refs = _files(tmp_path)
    with FakeOpenAIServer(answer=lambda b: {"content": '{"semantic": 0.5, "overall": 0.5}',
                                            "usage": {"prompt_tokens": -10**9,
                                                      "completion_tokens": 10**12}}) as srv:
        code = main(_command("capscore", caps, refs, tmp_path, srv.base_url))
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert "0 in / 0 out tokens" in out and "token counts of 2 replies" in out, out


def test_a_dripping_server_meets_the_total_deadline():
    with FakeOpenAIServer(answer=lambda b: {"content": "yes", "drip": 0.3}) as srv:
        b = _backend(srv, timeout_s=5, deadline_s=1.0, max_retries=3)
        t0 = time.monotonic()
        [res] = b.generate([GenRequest("slowly")])
        took = time.monotonic() - t0
    assert res.text is None and "deadline" in res.error and took < 3.0, (took, res.error)
    assert srv.calls == 1  # a server that slow is not asked again


@pytest.mark.parametrize("opt,value", [("timeout_s", 0), ("deadline_s", -1),
                                       ("connect_timeout_s", float("inf"))])
def test_deadlines_must_be_positive_seconds(opt, value):
    from capaudit.errors import InputError

    with pytest.raises(InputError, match=opt):
        make_backend("openai", {"model": "m", opt: value})


def test_a_key_echoed_in_an_answer_is_not_stored():
    with FakeOpenAIServer(answer=lambda b: f"your key is {KEY}, thanks") as srv:
        b = _backend(srv, api_key_env="JUDGE_KEY")
        [res] = b.generate([GenRequest("echo my key")])
    assert res.text == "your key is [redacted], thanks"


def test_a_password_in_the_judge_url_is_not_printed(tmp_path, capsys):
    caps, refs = _files(tmp_path)
    args = _command("capscore", caps, refs, tmp_path, "http://judge:hunter2pw@127.0.0.1:9/v1")
    code = main(args)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "did not answer" in lines[0], err
    assert "hunter2pw" not in err and "http://[redacted]@127.0.0.1:9/v1" in err, err


def test_a_server_that_never_answers_meets_the_deadline():
    """Accepts the connection, never sends a header: the per-read timeout alone (30 s here)
    would wait, the total deadline ends it."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held = []
    threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()
    try:
        b = make_backend("openai", {"model": "m", "max_retries": 2, "timeout_s": 30,
                                    "deadline_s": 1.0, "base_url":
                                    f"http://127.0.0.1:{listener.getsockname()[1]}/v1"})
        t0 = time.monotonic()
        [res] = b.generate([GenRequest("hello?")])
        took = time.monotonic() - t0
    finally:
        listener.close()
    assert res.text is None and "deadline" in res.error and took < 3.0, (took, res.error)
