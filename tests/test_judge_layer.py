"""The judge layer against a scripted OpenAI-compatible server on 127.0.0.1: protocol,
strict parsing, the one format retry, unparsed, 429/5xx, slow answers, caps, cache, resume,
and a dry run that makes no call at all."""

from __future__ import annotations

import math

import pytest

from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.errors import InputError
from capaudit.judge import Judge, JudgeConfig, ParseError, Task
from capaudit.judge.core import p_yes_from_logprobs
from capaudit.judge.parse import label_answer, matches, score01, unit_list, yes_no_critique
from judge_script import scripted_answer


def cfg(srv=None, tmp_path=None, **kw):
    base = {"model": "judge-vlm", "url": srv.base_url if srv else "http://127.0.0.1:9/v1",
            "cache": str(tmp_path / "cache.sqlite") if tmp_path else None, "concurrency": 4,
            "max_retries": 2, "prices": {"judge-vlm": {"input": 1.0, "output": 4.0}}}
    return JudgeConfig(**{**base, **kw})


def fact_task(sentence, context="(none)"):
    return Task("judge_factuality", {"evidence": "Evidence: the attached image.",
                                     "context": context, "sentence": sentence}, yes_no_critique)


def test_protocol_parse_and_p_yes(tmp_path):
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        j = Judge(cfg(srv, tmp_path))
        v = j.run([fact_task("A dog runs."), fact_task("A unicorn flies.", "A dog runs."),
                   Task("judge_factuality", {"evidence": "x", "context": "c", "sentence": "s"},
                        yes_no_critique, (b"\x89PNG", "image/png"))])
    assert [x.status for x in v] == ["ok", "ok", "ok"]
    assert v[0].value == (True, "") and v[1].value == (False, "there is no unicorn")
    assert v[0].p_yes == pytest.approx(0.9 / (0.9 + 0.1)) and v[1].p_yes == pytest.approx(0.2)
    body = next(b for b in srv.bodies if "unicorn" in str(b["messages"][-1]["content"]))
    assert body["model"] == "judge-vlm" and body["temperature"] == 0.0
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert "Earlier sentences: <<A dog runs.>>" in body["messages"][-1]["content"]
    img = [b for b in srv.bodies if isinstance(b["messages"][-1]["content"], list)][0]
    assert img["messages"][-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    ident = j.identity()
    assert ident["prompts"]["judge_factuality"] and len(ident["judge_id"]) == 12
    assert j.stats.calls == 3 and j.stats.ok == 3 and j.stats.tokens_in > 0
    assert j.stats.cost == pytest.approx(j.stats.tokens_in / 1e6 + 4 * j.stats.tokens_out / 1e6)


def test_strict_parsers():
    assert yes_no_critique("**Yes**") == (True, "")
    assert yes_no_critique("no\nCritique: the dog is brown") == (False, "the dog is brown")
    assert yes_no_critique('{"factual": false, "critique": "x"}') == (False, "x")
    for bad in ("Yes, the dog is there", "maybe", "", "The answer is yes", '{"factual": "no"}'):
        with pytest.raises(ParseError):
            yes_no_critique(bad)
    assert unit_list('```json\n{"units": [{"text": "a dog", "type": "object"}]}\n```') == \
        [{"text": "a dog", "type": "object", "relevant": True, "sentence": None}]
    with pytest.raises(ParseError):
        unit_list('{"units": [{"text": "a dog", "type": "colour"}]}')
    with pytest.raises(ParseError):
        matches(2, 1)('{"matches": [[0, 1]]}')  # list B has only unit 0
    assert matches(2, 2)('{"matches": [[1, 0], [1, 0]]}') == [(1, 0)]
    assert label_answer(("COR", "INC", "MISS"))(" cor. ") == "COR"
    with pytest.raises(ParseError):
        score01('{"semantic": 1.5, "overall": 0.2}')
    assert p_yes_from_logprobs(None) is None
    lp = [{"token": "{", "logprob": 0}, {"token": " Yes", "logprob": math.log(0.6),
                                          "top_logprobs": [{"token": "Yes", "logprob": math.log(0.6)},
                                                           {"token": "No", "logprob": math.log(0.2)}]}]
    assert p_yes_from_logprobs(lp) == pytest.approx(0.75)


def test_one_format_retry_then_unparsed_never_counted(tmp_path):
    def answer(body):
        text = body["messages"][-1]["content"]
        if "rambling" in text:
            return "Well, it depends on how you look at it."
        if "late sentence" in text and "could not be read" not in text:
            return "Sure! Let me think."
        return "yes"

    with FakeOpenAIServer(answer=answer) as srv:
        j = Judge(cfg(srv, tmp_path))
        v = j.run([fact_task("A rambling sentence."), fact_task("A late sentence.")])
    assert v[0].status == "unparsed" and v[0].value is None and "depends" in v[0].text
    assert v[1].status == "ok" and v[1].value == (True, "")
    retries = [b for b in srv.bodies if "could not be read" in b["messages"][-1]["content"]]
    assert len(retries) == 2  # exactly one reminder per unparsable answer
    assert "line 1" in retries[0]["messages"][-1]["content"] or "first line" in \
        retries[0]["messages"][-1]["content"]
    assert j.stats.unparsed == 1 and j.stats.ok == 1 and j.stats.format_retries == 2


def test_429_and_5xx_retried_malformed_reply_failed(tmp_path):
    calls = {"n": 0}

    def answer(body):
        calls["n"] += 1
        text = body["messages"][-1]["content"]
        if "malformed" in text:
            return {"raw": b"<html>not json</html>"}
        if "busy" in text and calls["n"] <= 2:
            return {"status": 429}
        if "broken" in text and calls["n"] <= 4:
            return {"status": 503}
        return "yes"

    with FakeOpenAIServer(answer=answer) as srv:
        j = Judge(cfg(srv, tmp_path, concurrency=1, max_retries=3))
        import capaudit.llm.openai as oa
        j.backend.backoff_s = 0.01
        v = j.run([fact_task("A busy one."), fact_task("A broken one."),
                   fact_task("A malformed one.")])
    assert [x.status for x in v] == ["ok", "ok", "failed"]
    assert j.stats.failed == 1 and oa.RETRY_STATUS >= {429, 503}


def test_slow_server_times_out_as_failed_and_unreachable_is_one_line(tmp_path):
    with FakeOpenAIServer(answer=lambda b: {"content": "yes", "delay": 2.0}
                          if "slow" in b["messages"][-1]["content"] else "yes") as srv:
        j = Judge(cfg(srv, tmp_path, timeout_s=0.7, max_retries=0))  # margin for a busy CI
        v = j.run([fact_task("A quick one."), fact_task("A slow one.")])
    assert [x.status for x in v] == ["ok", "failed"] and "timed out" in v[1].error.lower()
    with pytest.raises(InputError, match="did not answer at http://127.0.0.1:9/v1"):
        Judge(cfg(None, tmp_path, max_retries=0, timeout_s=1)).run([fact_task("x")])


def test_caps_stop_cleanly_and_rerun_continues_from_cache(tmp_path):
    tasks = [fact_task(f"Sentence number {i}.") for i in range(10)]
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        j = Judge(cfg(srv, tmp_path, max_calls=4))
        v = j.run(tasks)
        assert [x.status for x in v].count("ok") == 4 and j.stats.not_judged == 6
        assert j.stats.stopped == "max-calls 4 reached" and srv.calls == 4
        j.close()
        j2 = Judge(cfg(srv, tmp_path, max_calls=6))  # the 4 cached answers are free
        v2 = j2.run(tasks)
        assert all(x.status == "ok" for x in v2) and j2.stats.cache_hits == 4
        assert v2[0].cached and v2[0].p_yes == pytest.approx(0.9)  # log-probs are cached too
        assert j2.stats.calls == 6 and srv.calls == 10
        j2.close()
        # max-cost: each call is estimated before it is sent
        j3 = Judge(cfg(srv, tmp_path / "other", max_cost=0.0004))
        v3 = j3.run(tasks)
        est = j3._estimate(tasks[0])
        per_call = est[0] / 1e6 + 4 * est[1] / 1e6
        assert [x.status for x in v3].count("ok") == int(0.0004 // per_call)
        assert j3.stats.stopped == "max-cost 0.0004 reached"


def test_dry_run_builds_no_backend_and_prices_the_estimate(tmp_path):
    j = Judge(cfg(None, tmp_path, dry_run=True))  # the URL is unreachable: never touched
    tasks = [fact_task("A dog."), Task("judge_factuality", {"evidence": "e", "context": "c",
                                                           "sentence": "s"}, yes_no_critique,
                                       (b"img", "image/jpeg"), expect_out=25)]
    v = j.run(tasks)
    assert [x.status for x in v] == ["dry-run", "dry-run"] and j._backend is None
    tin = [math.ceil(len(j.render(t)) / 4.0) for t in tasks]
    assert j.stats.est_calls == 2 and j.stats.est_tokens_in == tin[0] + tin[1] + 765
    assert j.stats.est_tokens_out == 60 + 25
    assert j.stats.est_cost == pytest.approx((tin[0] + tin[1] + 765) / 1e6 + 4 * 85 / 1e6)
    assert not (tmp_path / "cache.sqlite").exists()


def test_unknown_backend_and_cost_cap_without_price(tmp_path):
    with pytest.raises(InputError, match="did you mean 'openai'"):
        Judge(cfg(None, tmp_path, backend="opena1"))
    with pytest.raises(InputError, match="cannot judge"):
        Judge(cfg(None, tmp_path, backend="echo"))
    with pytest.raises(InputError, match="needs a price"):
        Judge(cfg(None, tmp_path, model="other", max_cost=1.0, dry_run=True))


def test_shipped_judge_yaml_uses_only_known_keys_and_prices_are_per_million():
    from pathlib import Path

    from capaudit.core.config import load_yaml
    from capaudit.judge.runner import DEFAULTS

    data = load_yaml(Path(__file__).resolve().parents[1] / "configs" / "judge.yaml")
    assert set(data) <= set(DEFAULTS), set(data) - set(DEFAULTS)
    jc = JudgeConfig.from_mapping(data["judge"])  # unknown judge keys would raise
    assert all(set(p) == {"input", "output"} for p in jc.prices.values())
    with pytest.raises(InputError, match="unknown judge setting"):
        JudgeConfig.from_mapping({"modle": "x"})
