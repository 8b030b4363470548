"""Several workers decide a judge's failures as one worker does (judge/step.py
``answered_again``): a chunk whose judge answered nothing is not fatal when its set's other
chunks were answered (its units counted as failed); a set none of whose units were answered
stops the run with one line, nothing stored."""

from __future__ import annotations

import pytest

from test_judge_chunks import SECOND, _factuality


def _failing(which: str):
    """The scripted judge, a 500 for the sentences of one chunk (``which``), or for all."""
    from judge_script import prompt_text, scripted_answer

    def answer(body):
        sentence = prompt_text(body).split("Sentence: <<", 1)[-1].split(">>", 1)[0]
        fails = {"second": sentence in SECOND, "first": sentence not in SECOND,
                 "all": True}[which]
        return {"status": 500} if fails else scripted_answer(body)
    return answer


@pytest.mark.parametrize("which", ["first", "second"])
def test_a_chunk_the_judge_never_answered_is_stored_as_one_worker_stores_it(
        which, tmp_path, monkeypatch, capsys):
    from capaudit.enrich.testing import FakeOpenAIServer

    monkeypatch.chdir(tmp_path)
    runs = {}
    for n, workers in enumerate((1, 2)):
        with FakeOpenAIServer(answer=_failing(which)) as srv:
            rc, runs[workers] = _factuality(tmp_path, srv.base_url, n, "--workers", workers,
                                            "--work-dir", tmp_path / f"w{workers}")
        assert rc == 0, capsys.readouterr().err
        # every request counts, the unanswered chunk's first pass too (2 workers: 9 and 7)
        assert runs[workers]["summary"]["calls"] == srv.calls
    one, two = runs[1], runs[2]
    failed = len(SECOND) if which == "second" else 7 - len(SECOND)
    for summary in (one["summary"], two["summary"]):
        assert (summary["ok"], summary["failed"]) == (7 - failed, failed)
    for part in ("items", "values", "extra"):
        assert two[part] == one[part]
    # parts with failures are not kept for a resume: the work folder holds nothing after
    assert not list((tmp_path / "w2").rglob("set-*.json"))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_judge_that_answers_nothing_stops_the_run_with_one_line(workers, tmp_path,
                                                                  monkeypatch, capsys):
    from capaudit.enrich.testing import FakeOpenAIServer

    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(answer=_failing("all")) as srv:
        rc, out = _factuality(tmp_path, srv.base_url, 0, "--workers", workers,
                              "--work-dir", tmp_path / "w")
    captured = capsys.readouterr()
    assert rc == 2 and out is None and not (tmp_path / "f.json").exists()
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("capaudit: error: set k failed: the judge did not answer"), \
        captured.err
    assert "stored" not in captured.out
    assert not list((tmp_path / "w").rglob("set-*.json"))
