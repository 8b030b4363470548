"""A judged set in chunks of whole images (several workers, :mod:`capaudit.judge.parts`):
the chunks keep an image whole and split a set evenly, and a set judged in chunks (each part
written to the work folder and read back) has the items, values and extra of the same set
judged whole, for every metric that chunks; a run killed after one chunk resumes with the
other chunk's calls only."""

from __future__ import annotations

import json
from importlib import import_module

import pytest

from capaudit.judge.parts import image_chunks


def test_a_chunk_holds_whole_images_and_about_its_share_of_captions():
    # images 1 and 4 twice, two captions without an image id (an image each): 8 captions
    ids = [1, 2, 1, 3, None, None, 4, 4]
    assert image_chunks(ids, 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]     # 4 + 4
    assert image_chunks(ids, 3) == [[0, 1, 2], [3, 4, 5], [6, 7]]   # about 8/3 each
    # a chunk takes an image's captions wherever they are: image 2 is the first and last
    assert image_chunks([2, 1, 3, 1, 4, 2], 2) == [[0, 1, 3, 5], [2, 4]]
    assert image_chunks([7, 7, 7], 4) == [[0, 1, 2]]   # one image: one chunk, not four
    assert image_chunks([5, 6], 1) == [[0, 1]]


# image 2's captions first and last, image 1 in between: its two chunks interleave
SET = [(2, "A man rides a surfboard on a wave."), (1, "A purple horse stands. It is beautiful."),
       (3, "A man rides a surfboard on a wave."), (1, "A horse eats grass."),
       (4, "A brown dog runs in the park. The dog chases a ball."),
       (2, "A unicorn sits at a table. The table holds a cake.")]
HUMAN = {1: ["A brown horse stands in a field."], 2: ["A surfer rides a wave."],
         3: ["A man sits at a table with a cake."], 4: ["A brown dog chases a ball."]}
ELEMENTS = [(1, "object", "horse"), (1, "color", "brown horse"), (2, "object", "wave"),
            (3, "object", "table"), (4, "color", "brown dog"), (4, "object", "ball")]


@pytest.fixture(scope="module")
def judge_url():
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    with FakeOpenAIServer(answer=scripted_answer) as srv:
        yield srv.base_url


def _inputs(tmp_path, url: str):
    from dataclasses import asdict

    from PIL import Image

    from capaudit.judge.config import JudgeConfig
    from capaudit.judge.evidence import Captions, Evidence

    images = {}
    for i in HUMAN:
        Image.new("RGB", (8, 8), (i * 40, 80, 160)).save(tmp_path / f"{i}.jpg", "JPEG")
        images[i] = ((tmp_path / f"{i}.jpg").read_bytes(), "image/jpeg")
    (tmp_path / "el.jsonl").write_text("\n".join(json.dumps(
        {"image_id": i, "dimension": d, "element": e}) for i, d, e in ELEMENTS))
    jcfg = JudgeConfig(model="j", url=url, cache=None)
    cfg = {"judge": asdict(jcfg), "n_boot": 50, "seed": 0, "limit": None,
           "assumed_units": 8, "annotations": str(tmp_path / "el.jsonl")}
    s = Captions("m", [i for i, _ in SET], [c for _, c in SET], "test")
    return s, Evidence("image", images, HUMAN), cfg, jcfg


@pytest.mark.parametrize("metric", ["factuality", "dcscore", "faithscore", "capscore",
                                    "capability"])
def test_a_set_judged_in_chunks_is_the_set_judged_whole(metric, tmp_path, judge_url):
    from capaudit.judge.core import Judge
    from capaudit.judge.step import JudgeStep, judge_part

    module = f"capaudit.judge.{metric}"
    s, evidence, cfg, jcfg = _inputs(tmp_path, judge_url)
    judge = Judge(jcfg)
    whole = import_module(module).compute(judge, [s], evidence, cfg)
    judge.close()
    step = JudgeStep(module, [s], evidence, cfg, str(tmp_path / "work"), jcfg=jcfg)
    tasks = step.plan(str(tmp_path / "work"), 2)
    assert [t.idx for t in tasks] == [((0, 1, 3, 5),), ((2, 4),)]   # images 2+1, then 3+4
    assert [t.label for t in tasks] == ["m (part 1 of 2)", "m (part 2 of 2)"]
    # the second chunk done first (workers finish in any order); the parts are read back
    done = {i: judge_part(tasks[i]) for i in (1, 0)}
    assert all(d["status"] == "done" for d in done.values())
    assert sorted(p.name for p in (tmp_path / "work").rglob("*.json")) == [
        "set-00000-001.done.json", "set-00000-001.json",
        "set-00000-002.done.json", "set-00000-002.json"]
    out, summary = step.merge(tasks, [done])
    assert out.items == whole.items and out.values == whole.values
    assert out.extra == whole.extra
    assert summary["ok"] > 0 and summary["failed"] == 0
    caption_rows = [r["caption_idx"] for r in out.items["m"]]
    assert sorted(set(caption_rows)) == list(range(len(SET)))


def test_one_worker_or_a_cap_keeps_a_task_per_set_and_validate_is_never_cut(tmp_path):
    """One worker must batch the requests as before (its calls and cache hits); a cap is one
    judge's counts; a labels file's rows have no caption index to be put back in order."""
    from dataclasses import replace

    from capaudit.judge.step import task_groups

    s, _, _, jcfg = _inputs(tmp_path, "http://127.0.0.1:9/v1")
    n = replace(s, name="n")
    assert [g[0] for g in task_groups("capaudit.judge.dcscore", [s, n], jcfg, 1)] == \
        ["set-00000", "set-00001"]
    assert [(g[0], g[3]) for g in task_groups("capaudit.judge.dcscore", [s, n], jcfg, 2)] == \
        [("set-00000-001", ((0, 1, 3, 5),)), ("set-00000-002", ((2, 4),)),
         ("set-00001-001", ((0, 1, 3, 5),)), ("set-00001-002", ((2, 4),))]
    capped = replace(jcfg, max_calls=10)
    assert [g[:2] for g in task_groups("capaudit.judge.dcscore", [s, n], capped, 2)] == \
        [("set-00000", "m, n")]
    assert len(task_groups("capaudit.judge.validate", [s], jcfg, 2)) == 1
    one_image = replace(s, image_ids=[7] * len(s.captions))   # one chunk: the set's own task
    assert [(g[0], g[3]) for g in task_groups("capaudit.judge.factuality", [one_image], jcfg,
                                              2)] == [("set-00000", ())]


def test_a_set_without_annotated_images_is_refused_before_any_call(tmp_path, capsys,
                                                                  monkeypatch):
    """capability's check sees the sets whole (a chunk of one cannot tell): the second set
    is refused before the first is judged, whatever the workers, and no work folder is
    left."""
    from capaudit.cli.main import main
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "a.jsonl").write_text('{"image_id": 1, "caption": "a horse"}\n')
    (tmp_path / "b.jsonl").write_text('{"image_id": 2, "caption": "a dog"}\n'
                                      '{"image_id": 3, "caption": "a cat"}\n')
    (tmp_path / "el.jsonl").write_text(
        '{"image_id": 1, "dimension": "object", "element": "horse"}\n')
    for workers in (1, 2):
        with FakeOpenAIServer(answer=scripted_answer) as srv:
            rc = main([str(a) for a in ["audit", "capability", tmp_path / "a.jsonl",
                                        tmp_path / "b.jsonl", "--annotations",
                                        tmp_path / "el.jsonl", "--judge-url", srv.base_url,
                                        "--db", tmp_path / "j.duckdb", "--workers", workers]])
        err = capsys.readouterr().err
        assert rc == 2 and srv.calls == 0
        assert err.strip() == ("capaudit: error: no annotated element for any image of 'b' "
                               "(fix: check that the annotation image ids are the set's "
                               "image ids)"), err
    assert not list(tmp_path.glob("*.work"))


# a set whose second chunk (images 3 and 4) shares no sentence with its first (2 and 1)
KILLED = [(2, "A man rides a surfboard on a wave."), (1, "A purple horse stands. It is lovely."),
          (3, "A unicorn sits at a table."), (1, "A horse eats grass."),
          (4, "A brown dog runs in the park."), (2, "A wave breaks.")]
SECOND = {"A unicorn sits at a table.", "A brown dog runs in the park."}


def _factuality(tmp_path, url: str, n: int, *extra) -> tuple[int, dict | None]:
    """``audit factuality`` of :data:`KILLED` on response cache number ``n`` (one per run:
    only the work folder can spare calls)."""
    from PIL import Image

    from capaudit.cli.main import main

    (tmp_path / "img").mkdir(exist_ok=True)
    for i in (1, 2, 3, 4):
        Image.new("RGB", (8, 8), (i * 40, 80, 160)).save(tmp_path / "img" / f"{i}.jpg")
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps({"image_id": i, "caption": c})
                                                for i, c in KILLED))
    (tmp_path / "quick.yaml").write_text(f"judge:\n  cache: {tmp_path / str(n)}.sqlite\n"
                                         "  max_retries: 0\n")
    out = tmp_path / "f.json"
    out.unlink(missing_ok=True)
    rc = main([str(a) for a in ["audit", "factuality", tmp_path / "k.jsonl", "--images",
                                tmp_path / "img", "--judge-url", url, "--n-boot", 50,
                                "--json", out, "--db", tmp_path / "j.duckdb", "--config",
                                tmp_path / "quick.yaml", *extra]])
    return rc, json.loads(out.read_text()) if rc == 0 else None


def test_a_run_killed_after_one_chunk_resumes_with_the_other_chunks_calls(tmp_path, capsys,
                                                                        monkeypatch):
    import time

    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import prompt_text, scripted_answer

    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"

    def first_chunk_only(body):
        """The scripted judge for the first chunk; a 500 for the second, once the first's
        marker is written (the run is then killed after one chunk, whatever the timing)."""
        sentence = prompt_text(body).split("Sentence: <<", 1)[-1].split(">>", 1)[0]
        if sentence not in SECOND:
            return scripted_answer(body)
        for _ in range(600):
            if list(work.rglob("set-00000-001.done.json")):
                break
            time.sleep(0.05)
        return {"status": 500}
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, whole = _factuality(tmp_path, srv.base_url, 1, "--work-dir", tmp_path / "w1")
    assert rc == 0 and whole["summary"]["calls"] == 7   # a call per sentence
    def killed(tasks, judged, unanswered):
        """The run killed as the driver hears that the second chunk's judge answered
        nothing (a set with an answered chunk is otherwise stored, its failures counted)."""
        from capaudit.errors import InputError

        assert list(unanswered) == ["set-00000-002"]
        raise InputError("killed here")
    monkeypatch.setattr("capaudit.judge.step.answered_again", killed)
    with FakeOpenAIServer(answer=first_chunk_only) as srv:
        rc, _ = _factuality(tmp_path, srv.base_url, 2, "--workers", 2, "--work-dir", work)
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and "killed here" in err, err
    assert [p.name for p in work.rglob("*.done.json")] == ["set-00000-001.done.json"]
    with FakeOpenAIServer(answer=lambda body: {"status": 500}) as srv:   # judge now gone:
        rc, _ = _factuality(tmp_path, srv.base_url, 5, "--workers", 2, "--work-dir", work)
    err = capsys.readouterr().err   # the resumed chunk does not make the set answered
    assert rc == 2 and err.count("\n") == 1 and "set k failed: the judge did not answer" in err
    assert [p.name for p in work.rglob("*.done.json")] == ["set-00000-001.done.json"]
    import shutil
    shutil.copytree(work, tmp_path / "again")   # resumed with another --workers below
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, resumed = _factuality(tmp_path, srv.base_url, 3, "--workers", 2, "--work-dir", work)
    assert rc == 0 and srv.calls == resumed["summary"]["calls"] == len(SECOND)
    assert resumed["summary"]["resumed_parts"] == 1 and "resumed_sets" not in resumed["summary"]
    assert "1 part(s) of a set resumed" in " ".join(capsys.readouterr().out.split())
    assert resumed["summary"]["ok"] == whole["summary"]["ok"] == 7
    for part in ("items", "values", "extra"):
        assert resumed[part] == whole[part]
    assert not list(work.rglob("*.json"))   # stored: the parts are gone
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, other = _factuality(tmp_path, srv.base_url, 4, "--work-dir", tmp_path / "again")
    assert rc == 0 and srv.calls == other["summary"]["calls"] == 7   # nothing reused ...
    assert other["summary"]["unreused_parts"] == [1, 2]   # ... and said so
    assert ("1 part(s) an earlier run left with --workers 2 or more were judged again, not reused"
            in " ".join(capsys.readouterr().out.split()))
    for part in ("items", "values", "extra"):
        assert other[part] == whole[part]


@pytest.mark.parametrize("command", ["audit factuality", "audit dcscore", "audit capability",
                                     "audit faithscore", "audit capscore", "judge validate"])
def test_the_help_shows_the_workers_a_judged_run_takes_without_the_flag(command, capsys,
                                                                        monkeypatch):
    """Whether a set is cut into chunks depends on --workers: the help showed the audit's
    default (2) where a judged run without the flag takes one worker (a task per set)."""
    from capaudit.cli.main import main
    from capaudit.judge.runner import RUN_DEFAULTS

    monkeypatch.setenv("COLUMNS", "300")
    main([*command.split(), "--help"])
    line = next(x for x in capsys.readouterr().out.splitlines() if "--workers" in x)
    assert f"[default: ({RUN_DEFAULTS['workers']})]" in line, line
