"""--max-calls is a hard cap on HTTP requests, retries included (#21): a server that
answers 429 first, or a reply that needs the format retry, never makes a capped run send
more requests than the cap; what was not judged is counted as such."""

from __future__ import annotations

from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.judge import Judge
from judge_script import scripted_answer
from test_judge_layer import cfg, fact_task


def test_max_calls_counts_retries_after_429(tmp_path):
    tasks = [fact_task(f"Sentence number {i}.") for i in range(10)]
    # the first 4 POSTs get 429: each is retried (max_retries 2) and each retry is a request
    with FakeOpenAIServer(answer=scripted_answer, fail_first=4, retry_after=0.0) as srv:
        j = Judge(cfg(srv, tmp_path, max_calls=5, concurrency=1))
        v = j.run(tasks)
        j.close()
    # unit 1: three 429s (failed); unit 2: a 429, then its answer; then the cap is spent
    assert srv.calls == 5
    statuses = [x.status for x in v]
    assert statuses[:2] == ["failed", "ok"] and statuses[2:] == ["not-judged"] * 8
    assert j.stats.not_judged == 8 and j.stats.stopped == "max-calls 5 reached"
    assert j.stats.calls == 5


def test_max_calls_counts_the_format_retry(tmp_path):
    tasks = [fact_task(f"Sentence number {i}.") for i in range(6)]
    # every first answer is unreadable: each unit costs two requests (answer + reminder)
    answer = (lambda b: "yes" if "could not be read" in str(b["messages"][-1]["content"])
              else "perhaps")
    with FakeOpenAIServer(answer=answer) as srv:
        j = Judge(cfg(srv, tmp_path, max_calls=5, concurrency=1))
        v = j.run(tasks)
        j.close()
    assert srv.calls == 5
    statuses = [x.status for x in v]
    # the first chunk (4 units) sends 4 answers, all unreadable; of their 4 format retries
    # one fits the cap (unit 1 becomes ok), the rest stay unparsed; units 5-6 are not judged
    assert statuses == ["ok", "unparsed", "unparsed", "unparsed", "not-judged", "not-judged"]
    assert j.stats.stopped == "max-calls 5 reached" and j.stats.not_judged == 2


def test_dry_run_leaves_out_what_the_cache_holds(tmp_path):
    """A dry run after a partial run prices only what is still to be asked."""
    tasks = [fact_task(f"Sentence number {i}.") for i in range(6)]
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        j = Judge(cfg(srv, tmp_path, max_calls=4))
        j.run(tasks)
        j.close()
    dry = Judge(cfg(None, tmp_path, dry_run=True))
    v = dry.run(tasks)
    dry.close()
    assert [x.cached for x in v] == [True] * 4 + [False] * 2
    assert dry.stats.est_cached == 4 and dry.stats.est_calls == 2
    tin = sum(dry._estimate(t)[0] for t in tasks[4:])
    assert dry.stats.est_tokens_in == tin
