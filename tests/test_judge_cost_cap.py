"""--max-cost counts the server's reported usage where given (#21), and each request's
estimate where the server reported none, or figures flagged as ignored (negative, absurd):
the judge stops sending once the cost so far plus the next chunk's estimate would cross the
cap, says ``max-cost ... reached`` and counts the units not judged."""

from __future__ import annotations

import pytest

from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.judge import Judge
from judge_script import scripted_answer
from test_judge_layer import cfg, fact_task


def _with_usage(usage):
    def answer(body):
        reply = scripted_answer(body)
        reply = dict(reply) if isinstance(reply, dict) else {"content": reply}
        return {**reply, "usage": usage}
    return answer


def _run(tmp_path, usage, cap, n=12):
    tasks = [fact_task(f"Sentence number {i}.") for i in range(n)]
    with FakeOpenAIServer(answer=_with_usage(usage)) as srv:
        # concurrency 1: chunks of 4 units, the cap checked before each chunk
        j = Judge(cfg(srv, tmp_path, max_cost=cap, concurrency=1))
        v = j.run(tasks)
        j.close()
    tin, tout = j._estimate(tasks[0])
    return j, v, srv, tin / 1e6 + 4 * tout / 1e6


@pytest.mark.parametrize("usage", [{"total_tokens": None},                  # none reported
                                   {"prompt_tokens": -5, "completion_tokens": 2}],  # absurd
                         ids=["no-usage", "absurd-usage"])
def test_replies_without_believable_usage_count_their_estimate(tmp_path, usage):
    # every unit is estimated alike (same prompt length): the cap affords 6 of them
    j0 = Judge(cfg(None, tmp_path, dry_run=True))
    tin, tout = j0._estimate(fact_task("Sentence number 0."))
    per_call = tin / 1e6 + 4 * tout / 1e6
    cap = 6.5 * per_call
    j, v, srv, est = _run(tmp_path, usage, cap)
    assert est == pytest.approx(per_call)
    # chunk 1: 4 units (4 estimates <= cap); chunk 2: 4 + 2 fit, the 7th would cross
    assert srv.calls == 6
    assert [x.status for x in v] == ["ok"] * 6 + ["not-judged"] * 6
    assert j.stats.stopped == f"max-cost {cap} reached" and j.stats.not_judged == 6


def test_reported_usage_counts_where_given(tmp_path):
    # the server reports 5,000 prompt tokens and 10 answer tokens: $0.00504 a call
    usage = {"prompt_tokens": 5000, "completion_tokens": 10}
    j, v, srv, est = _run(tmp_path, usage, cap=0.01)
    assert 12 * est < 0.01               # the estimates alone would let every unit through
    # chunk 1 (4 units, by estimate) costs 0.02016 as reported: nothing more is sent
    assert srv.calls == 4 and j.stats.not_judged == 8
    assert j.stats.cost == pytest.approx(4 * 0.00504)
    assert j.stats.stopped == "max-cost 0.01 reached"


def test_format_retries_are_held_to_the_cost_cap(tmp_path):
    # every first answer is unreadable, the reminder's answer reads; no usage reported
    def answer(body):
        text = str(body["messages"][-1]["content"])
        return {"content": "yes" if "could not be read" in text else "perhaps",
                "usage": {"total_tokens": None}}

    tasks = [fact_task(f"Sentence number {i}.") for i in range(6)]
    j0 = Judge(cfg(None, tmp_path, dry_run=True))
    tin, tout = j0._estimate(tasks[0])
    cap = 5.5 * (tin / 1e6 + 4 * tout / 1e6)
    with FakeOpenAIServer(answer=answer) as srv:
        j = Judge(cfg(srv, tmp_path, max_cost=cap, concurrency=1))
        v = j.run(tasks)
        j.close()
    # 4 answers, then 1 of their 4 retries fits (5 estimates <= 5.5); then nothing more
    assert srv.calls == 5
    assert [x.status for x in v] == ["ok", "unparsed", "unparsed", "unparsed",
                                     "not-judged", "not-judged"]
    assert j.stats.stopped == f"max-cost {cap} reached" and j.stats.not_judged == 2
