"""Judged commands as steps of the runner (#44): the outputs of every judged command with
the default options are those recorded before the move (digests of the ``--json`` result
and of the stored rows, :mod:`judged_runs`), and however the judging is spread (one task,
a task per set, two workers judging each set in two chunks, Ray) the items and values are
the same."""

from __future__ import annotations

import json

import pytest

from judged_runs import SETS, all_outputs, corpus, digest

from capaudit.judge.factuality import split_sentences

SETS_M_SENTENCES = [s for _, c in SETS["m"] for s in split_sentences(c)]

# recorded on the code before judged runs became steps (3ac2ce4, its src and configs, with
# tests/judged_runs.py as it is): each command's --json result, in the file's own key order,
# and the rows it stored
BEFORE = {"capped": "fc36591a490f9cd6", "factuality": "fececa8198036450",
          "dcscore": "a423ba61f4a09780", "faithscore": "db3d8c9f950c6f6b",
          "capscore": "6850729511c45779", "capability": "fedacfdba8debd74",
          "validate": "e9333b0b725f3fe5", "dry-run": "278199d52c43d13d"}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """The default response cache lives in the user cache dir: one per test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))


def test_default_runs_are_byte_identical_to_before_the_move(tmp_path, capsys):
    out = all_outputs(tmp_path / "a")
    capsys.readouterr()
    assert {k: v["rc"] for k, v in out.items()} == dict.fromkeys(out, 0)
    assert out["capped"]["result"]["summary"]["stopped"] == "max-calls 9 reached"
    assert {k: digest(v) for k, v in out.items()} == BEFORE
    assert not list((tmp_path / "a").glob("*.work"))   # stored: the work folders are gone


def _fresh_cache(monkeypatch, tmp_path, name: str) -> None:
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / f"cache-{name}"))


def _judged(out: dict) -> dict:
    """What must not depend on how the judging was spread: each command's items and values
    (and extra: Welch's test, the agreement)."""
    return {k: {p: v["result"][p] for p in ("items", "values", "extra", "agreement")
                if p in v["result"]} for k, v in out.items()}


SPREAD = ("factuality", "dcscore", "faithscore", "capscore", "capability")


@pytest.mark.slow
def test_one_task_a_task_per_set_and_two_workers_judge_alike(tmp_path, monkeypatch, capsys):
    """A task per set (the default), one task holding both sets (a cap no run reaches) and
    two worker processes: the same items and values; one worker makes the same calls."""
    _fresh_cache(monkeypatch, tmp_path, "per-set")
    per_set = all_outputs(tmp_path / "per-set", which=SPREAD)
    _fresh_cache(monkeypatch, tmp_path, "one")
    one = all_outputs(tmp_path / "one", ("--max-calls", 100000), which=SPREAD)
    _fresh_cache(monkeypatch, tmp_path, "two")
    two = all_outputs(tmp_path / "two", ("--workers", 2), which=SPREAD)
    assert "judges every set in one task" not in capsys.readouterr().out
    assert _judged(per_set) == _judged(one) == _judged(two)
    for name in SPREAD:   # one worker: every request as before, none sent twice
        a, b = per_set[name]["result"]["summary"], one[name]["result"]["summary"]
        assert (a["calls"], a["cache_hits"], a["ok"]) == (b["calls"], b["cache_hits"], b["ok"])
        # two workers judge m in two chunks of whole images (1, 1, 2 | 3, 4): dcscore then
        # decomposes m's caption of images 2 and 3 (the same text) once in each
        twice = 1 if name == "dcscore" else 0
        assert two[name]["result"]["summary"]["ok"] == a["ok"] + twice > 0
    assert per_set["factuality"]["result"]["extra"]["welch_caption_share"]["n_a"] == 5


def test_a_capped_run_on_two_workers_is_todays_capped_run(tmp_path, monkeypatch, capsys):
    out = all_outputs(tmp_path / "w", ("--workers", 2), which=("capped",))
    assert "judges every set in one task" in capsys.readouterr().out
    run = out["capped"]["stored"]["run"]   # the command line, as given, is stored with it
    run[0] = run[0].replace(" --workers 2", "")
    assert out["capped"]["result"]["summary"]["stopped"] == "max-calls 9 reached"
    assert digest(out["capped"]) == BEFORE["capped"]


def _failing_beyond(known: set):
    """The scripted judge, answering HTTP 500 to any sentence not in ``known``: a judge that
    stops answering once the first set is judged (a run killed there)."""
    from judge_script import prompt_text, scripted_answer

    def answer(body):
        sentence = prompt_text(body).split("Sentence: <<", 1)[-1].split(">>", 1)[0]
        return scripted_answer(body) if sentence in known else {"status": 500}
    return answer


def _factuality(tmp_path, url: str, *extra, second: str = "n") -> tuple[int, dict | None]:
    from capaudit.cli.main import main

    c = corpus(tmp_path / "corpus")
    (tmp_path / "corpus" / "k.jsonl").write_text("\n".join(json.dumps(
        {"image_id": i, "caption": cap}) for i, cap in OTHER))
    out = tmp_path / "f.json"
    out.unlink(missing_ok=True)
    rc = main([str(a) for a in ["audit", "factuality", c["m"], tmp_path / "corpus" /
                                f"{second}.jsonl", "--images", c["img"],
                                "--judge-url", url, "--n-boot", 50, "--json", out,
                                "--db", tmp_path / "j.duckdb", "--config",
                                tmp_path / "quick.yaml", *extra]])
    return rc, json.loads(out.read_text()) if rc == 0 else None


def own_response_cache(tmp_path, n: int) -> None:
    """quick.yaml: response cache number ``n`` (one per run: only markers spare calls)."""
    (tmp_path / "quick.yaml").write_text(f"judge:\n  cache: {tmp_path / str(n)}.sqlite\n"
                                         "  max_retries: 0\n")


# a second set sharing no sentence with m
OTHER = [(1, "A horse stands in a field."), (3, "A unicorn sits at a table. It is lovely."),
         (4, "A dog runs.")]


def test_a_run_killed_after_a_set_resumes_without_judging_it_again(tmp_path, capsys):
    """A response cache of its own for each run: only the finished set's part and marker
    can spare its calls."""
    from capaudit.enrich.testing import FakeOpenAIServer
    from capaudit.store import Store
    from judge_script import scripted_answer

    def own_cache(n: int) -> None:
        own_response_cache(tmp_path, n)
    work = tmp_path / "work"
    own_cache(1)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, whole = _factuality(tmp_path, srv.base_url, "--work-dir", tmp_path / "other",
                                second="k")
    assert rc == 0 and whole["summary"]["calls"] == srv.calls
    calls = srv.calls
    first = len(SETS_M_SENTENCES)   # a request per sentence of m (a repeat is sent again)
    own_cache(2)
    with FakeOpenAIServer(answer=_failing_beyond(set(SETS_M_SENTENCES))) as srv:
        rc, _ = _factuality(tmp_path, srv.base_url, "--work-dir", work, second="k")
    err = capsys.readouterr().err
    assert rc == 2 and "did not answer" in err and err.count("\n") == 1, err
    assert "Traceback" not in err
    with Store(tmp_path / "j.duckdb", read_only=True) as st:   # the first run's rows only
        assert st.one("SELECT count(*) FROM runs")[0] == 1
    assert len(list(work.rglob("*.done.json"))) == 1
    part = next(work.rglob("set-00000.json"))
    saved = json.loads(part.read_bytes())
    part.unlink()   # a marker without its part: the set is judged again
    own_cache(4)
    with FakeOpenAIServer(answer=_failing_beyond(set(SETS_M_SENTENCES))) as srv:
        assert _factuality(tmp_path, srv.base_url, "--work-dir", work, second="k")[0] == 2
    again = json.loads(part.read_bytes())
    assert srv.calls > len(SETS_M_SENTENCES) and again["parts"] == saved["parts"]
    capsys.readouterr()
    own_cache(3)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, resumed = _factuality(tmp_path, srv.base_url, "--work-dir", work, second="k")
    assert rc == 0 and srv.calls == resumed["summary"]["calls"] == calls - first > 0
    assert resumed["summary"]["resumed_sets"] == 1
    assert "1 set(s) resumed" in " ".join(capsys.readouterr().out.split())
    assert resumed["summary"]["ok"] == whole["summary"]["ok"]
    for part in ("items", "values", "extra"):
        assert resumed[part] == whole[part]
    assert not list(work.rglob("*.json"))   # stored: the parts are gone


def test_the_judge_not_answering_is_one_line_on_two_workers(tmp_path, capsys):
    (tmp_path / "quick.yaml").write_text("judge:\n  max_retries: 0\n")
    rc, _ = _factuality(tmp_path, "http://127.0.0.1:9/v1", "--workers", 2)
    err = capsys.readouterr().err
    assert rc == 2 and "did not answer at http://127.0.0.1:9/v1" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    from capaudit.store import Store

    with Store(tmp_path / "j.duckdb", read_only=True) as st:
        assert st.one("SELECT count(*) FROM judge_items")[0] == 0
        assert st.one("SELECT count(*) FROM runs")[0] == 0


def test_a_dry_run_writes_no_part(tmp_path, capsys):
    (tmp_path / "quick.yaml").write_text("judge:\n  model: gpt-4o\n")
    rc, _ = _factuality(tmp_path, "http://127.0.0.1:9/v1", "--dry-run", "--work-dir",
                        tmp_path / "work")
    assert rc == 0 and "dry run" in capsys.readouterr().out
    assert not (tmp_path / "work").exists() and not (tmp_path / "j.duckdb").exists()


@pytest.mark.ray
@pytest.mark.slow
def test_ray_judges_as_the_local_workers(tmp_path, monkeypatch, capsys):
    pytest.importorskip("ray")
    import ray

    local = all_outputs(tmp_path / "local", which=("dcscore", "validate"))
    _fresh_cache(monkeypatch, tmp_path, "ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = all_outputs(tmp_path / "ray", ("--executor", "ray", "--workers", 2),
                             which=("dcscore", "validate"))
    finally:
        ray.shutdown()
    assert _judged(on_ray) == _judged(local)


def test_a_part_is_keyed_by_the_annotations_content_not_their_name(tmp_path):
    """capability reads --annotations in its task: edited in place, the sets are judged
    again (a part of the old elements is not reused); what its rows read (assumed_units)
    changes its key, n_boot and seed do not (only the merge's values read them)."""
    from capaudit.judge.runner import DEFAULTS, split_run
    from capaudit.judge.step import JudgeStep

    ann = tmp_path / "el.jsonl"
    ann.write_text('{"image_id": 1, "dimension": "object", "element": "horse"}\n')
    cfg, _ = split_run({**DEFAULTS, "annotations": str(ann)})

    def key(**over) -> str:
        return JudgeStep("capaudit.judge.capability", [], None, {**cfg, **over}, "w").key
    first = key()
    assert key() == first and key(n_boot=5) == first and key(seed=3) == first
    assert key(assumed_units=4) != first
    ann.write_text('{"image_id": 1, "dimension": "object", "element": "a horse"}\n')
    assert key() != first
    assert key(limit=3) != key()
