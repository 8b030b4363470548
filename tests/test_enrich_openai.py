"""The openai backend against a loopback OpenAI-compatible server (127.0.0.1 only)."""

from __future__ import annotations

import base64

from capaudit.llm import GenRequest, make_backend
from capaudit.enrich.testing import FakeOpenAIServer


def backend(srv, tmp_path=None, **opts):
    options = {"model": "m1", "base_url": srv.base_url, "backoff_s": 0.01, "max_retries": 3,
               "params": {"temperature": 0.0, "max_tokens": 32}, **opts}
    return make_backend("openai", options, tmp_path / "cache.sqlite" if tmp_path else None)


def test_protocol_image_as_data_url_and_key_from_env(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sekret")
    with FakeOpenAIServer() as srv:
        b = backend(srv, api_key_env="MY_KEY")
        res = b.generate([GenRequest("describe", image=b"\x89PNGxx", image_mime="image/png"),
                          GenRequest("Original caption: a dog\nfuse")])
    body = srv.bodies[0] if srv.bodies[0]["messages"][-1]["content"] != \
        "Original caption: a dog\nfuse" else srv.bodies[1]
    parts = body["messages"][-1]["content"]
    assert body["model"] == "m1" and body["temperature"] == 0.0 and body["max_tokens"] == 32
    url = next(p["image_url"]["url"] for p in parts if p["type"] == "image_url")
    assert url == "data:image/png;base64," + base64.b64encode(b"\x89PNGxx").decode()
    assert res[0].text.startswith("a photo (seen") and res[1].text.startswith("a dog (fused")
    assert res[0].tokens_out > 0 and b.stats.requests == 2 and b.stats.failures == 0


def test_retries_on_429_honouring_retry_after_then_succeeds():
    with FakeOpenAIServer(fail_first=2, fail_status=429, retry_after=0.01) as srv:
        b = backend(srv)
        [res] = b.generate([GenRequest("hello")])
    assert res.error is None and res.text
    assert srv.calls == 3 and b.stats.requests == 3 and b.stats.retries == 2


def test_5xx_exhausting_retries_is_a_reported_failure_not_an_exception():
    with FakeOpenAIServer(fail_first=100, fail_status=503) as srv:
        b = backend(srv, max_retries=2)
        [res] = b.generate([GenRequest("hello")])
    assert res.text is None and "HTTP 503" in res.error
    assert srv.calls == 3 and b.stats.failures == 1


def test_client_errors_are_not_retried():
    with FakeOpenAIServer(fail_first=100, fail_status=400) as srv:
        [res] = backend(srv).generate([GenRequest("hello")])
    assert srv.calls == 1 and "HTTP 400" in res.error


def test_unreachable_server_and_timeout_fail_cleanly():
    b = make_backend("openai", {"model": "m", "base_url": "http://127.0.0.1:9/v1",
                                "max_retries": 1, "backoff_s": 0.01, "timeout_s": 1})
    [res] = b.generate([GenRequest("x")])
    assert res.error and b.stats.retries == 1
    with FakeOpenAIServer(delay_s=1.0) as srv:
        [res] = backend(srv, timeout_s=0.2, max_retries=0).generate([GenRequest("x")])
    assert res.error and "timed out" in res.error.lower()


def test_bounded_concurrency():
    with FakeOpenAIServer(delay_s=0.15) as srv:
        b = backend(srv, concurrency=3)
        res = b.generate([GenRequest(f"p{i}") for i in range(9)])
    assert all(r.error is None for r in res)
    from capaudit.enrich.testing import answer_for

    assert [r.text for r in res] == [answer_for([{"role": "user", "content": f"p{i}"}])
                                     for i in range(9)]  # results keep request order
    assert srv.max_in_flight == 3


def test_cache_keyed_by_model_prompt_image_params(tmp_path):
    with FakeOpenAIServer() as srv:
        b = backend(srv, tmp_path)
        reqs = [GenRequest("a", image=b"img1"), GenRequest("a", image=b"img2"), GenRequest("b")]
        first = b.generate(reqs)
        assert srv.calls == 3
        b2 = backend(srv, tmp_path)  # a new process would see the same file
        again = b2.generate(reqs)
        assert srv.calls == 3 and b2.stats.cache_hits == 3 and all(r.cached for r in again)
        assert [r.text for r in again] == [r.text for r in first]
        backend(srv, tmp_path, model="m2").generate(reqs[:1])
        backend(srv, tmp_path, params={"temperature": 0.7}).generate(reqs[:1])
        assert srv.calls == 5
