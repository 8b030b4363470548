"""The hallucination filter's judge (``--judge``, #42): asked only about the sentences the
offline evidence leaves undecided, every verdict logged with the judge's reason, answers
cached per (sentence, image evidence, judge) so a rerun or a resumed run asks nothing twice.

The captions are three real LLaVA answers of the FaithScore dev labels (tune images, none of
the held-out ten), judged against their images' real CHAIR ground truth rows in object mode
``visual``; the judge is the loopback OpenAI-compatible server of ``enrich/testing.py``,
scripted: a sentence naming a cart is false, any other true. Which sentences reach it was
derived by hand from the ground truth (below), not from the filter.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import shared_path

import capaudit
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.errors import InputError

pytest.importorskip("spacy")

# image -> the FaithScore answer used (first record of the image with this opening)
ANSWERS = {97131: "One possible reason for the car to be parked on the side of the road",
           56013: "The image shows a luggage cart",
           506095: "The main focus of the image is a cat sitting on a desk"}
# Hand-derived. Ground truth: 97131 {car, parking meter, truck}; 56013 {backpack, bus,
# handbag, person, suitcase};
# 506095 {book, cat, dining table, laptop, mouse}. Visual mode names every visual noun;
# COCO's 80 are judged by the ground truth, others are undecided (no references here).
# 97131 s0 "the driver" (person, absent): unsupported, decided. s1 "two cars ... the road":
#   car supported, road undecided -> ASKED. s2 "the driver ... a nearby building": unsupported
#   (driver) although building is undecided: decided, never asked.
# 56013 s0 "luggage cart ... trolley ... suitcases, bags": luggage, suitcase -> suitcase and
#   trolley -> bus supported; cart, bag (not COCO's handbag) undecided -> ASKED;
#   s1 "The cart ... people": cart undecided -> ASKED; s2 "cart ... backpacks ... bags": ASKED;
#   s3 "the people ... the hotel": person supported, hotel no object of the vocabulary: decided.
# 506095 s0 "a cat ... a desk ... a laptop computer": all three supported: decided.
UNDECIDED = [(97131, 1), (56013, 0), (56013, 1), (56013, 2)]
# --judge kept: also every other kept sentence of a covered image
KEPT = sorted(UNDECIDED + [(56013, 3), (506095, 0)])
SENT = re.compile(r"Sentence: <<(.*?)>>", re.S)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    labels = shared_path("data", "human_labels", "faithscore_annotation.jsonl")
    gt_all = shared_path("data", "coco2014", "chair_objects_trainval2014.jsonl")
    tmp = tmp_path_factory.mktemp("judge")
    answers = {}
    for rec in map(json.loads, labels.read_text().splitlines()):
        iid = int(rec["id"])
        if iid in ANSWERS and rec["answer"].startswith(ANSWERS[iid]) and iid not in answers:
            answers[iid] = rec["answer"]
    nv = next(r["answer"] for r in map(json.loads, labels.read_text().splitlines())
              if r["answer"].startswith("The car might be parked on the side of the road "
                                        "because"))   # 97131's: non-visual mentions
    (tmp / "nv.jsonl").write_text(json.dumps({"image_id": 97131, "caption": nv}) + "\n")
    src = tmp / "fs.jsonl"
    src.write_text("".join(json.dumps({"image_id": i, "caption": a}) + "\n"
                           for i, a in answers.items()))
    gt = tmp / "gt.jsonl"   # the images' rows of the real ground truth (a fast setup)
    gt.write_text("".join(line + "\n" for line in gt_all.read_text().splitlines()
                          if json.loads(line)["image_id"] in ANSWERS))
    return {"src": src, "gt": str(gt), "answers": answers, "nv": tmp / "nv.jsonl"}


def _script(asked: list):
    def answer(body):
        content = body["messages"][-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        sentence = SENT.search(text).group(1)
        asked.append(sentence)
        return "no\nthere is no cart in the image" if "cart" in sentence else "yes"
    return answer


def _sentences(store, name: str) -> dict:
    return {(r[0], r[1]): r for r in store.query(
        f"SELECT image_id, sentence_idx, action, reason, critique, original FROM filter_log "
        f"WHERE set_name = '{name}' ORDER BY row_idx, sentence_idx").rows}


def _run(store, out, gt, srv, **extra):
    return store.filter("s", "hallucination", out, chair_gt=gt, object_mode="visual",
                        action="flag", judge_url=srv.base_url, **extra)


@pytest.fixture
def store(data, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))   # the judge's cache
    st = capaudit.open(tmp_path / "j.duckdb")
    st.add_set("s", data["src"])
    return st


@pytest.mark.parametrize("scope, expected", [("undecided", UNDECIDED), ("kept", KEPT)])
def test_only_the_sentences_the_evidence_leaves_undecided_reach_the_judge(
        data, store, scope, expected):
    asked: list = []
    with FakeOpenAIServer(answer=_script(asked)) as srv:
        _, summary = _run(store, "f", data["gt"], srv, judge=scope)
    log = _sentences(store, "f")
    want = [log[k][5].strip() for k in expected]
    assert sorted(asked) == sorted(want) and srv.calls == len(want)
    prompt = next(b["messages"][-1]["content"] for b in srv.bodies
                  if log[(97131, 1)][5].strip() in b["messages"][-1]["content"])
    assert "Evidence: no image is attached.\nObjects the evidence finds in the image: car, " \
           "parking meter, truck\n" in prompt and "Earlier sentences: <<(none)>>" in prompt
    rep = summary.extra["judge"]
    carts = sum("cart" in s for s in want)
    assert (rep["sentences"], rep["questions"], rep["unsupported"], rep["supported"]) == \
        (len(want), len(want), carts, len(want) - carts)
    for key, (_, _, action, reason, critique, text) in log.items():
        if key not in expected:   # untouched: no judge in its reason
            assert "[judge" not in reason
        elif "cart" in text:
            assert action == "flag" and critique == "there is no cart in the image"
            assert reason.startswith("unsupported: ") and \
                reason.endswith("[judge: there is no cart in the image]")
        else:
            assert action == "keep" and critique is None and "[judge: yes]" in reason
    # the decided ones keep their evidence's reason: the driver, never the judge
    assert log[(97131, 2)][3] == "unsupported: driver->person" and log[(97131, 2)][2] == "flag"
    assert log[(56013, 0)][3].startswith("unsupported: cart->cart, bag->bag [judge: ")


def test_the_default_never_calls_a_judge_and_reports_none(data, store):
    with FakeOpenAIServer(answer=_script([])) as srv:
        _, summary = _run(store, "f", data["gt"], srv)
        assert srv.calls == 0 and "judge" not in summary.extra
    assert all("[judge" not in r[3] for r in _sentences(store, "f").values())
    # the filter's own counts are those of one decision per caption, judge or not
    store.add_set("nv", data["nv"])
    with FakeOpenAIServer(answer=_script([])) as srv:
        counts = [store.filter("nv", "hallucination", f"nv{j}", chair_gt=data["gt"],
                               object_mode="visual", judge=j, judge_url=srv.base_url
                               )[1].extra for j in (None, "kept")]
    assert counts[0]["parse"]["non_visual_mentions"] > 0 and "judge" in counts[1]
    assert (counts[1]["parse"], counts[1]["review"]) == (counts[0]["parse"],
                                                          counts[0]["review"])


def test_a_no_under_drop_caption_drops_the_whole_caption(data, store):
    with FakeOpenAIServer(answer=_script([])) as srv:
        _run(store, "f", data["gt"], srv, judge="undecided")
        store.filter("s", "hallucination", "d", chair_gt=data["gt"], object_mode="visual",
                     action="drop-caption", judge="undecided", judge_url=srv.base_url)
    flagged = _sentences(store, "f")
    log = _sentences(store, "d")
    cart = [k for k in log if k[0] == 56013]
    assert len(cart) == 4 and all(log[k][2] == "drop" for k in cart)   # s3 said nothing wrong
    assert log[(56013, 3)][3].startswith("caption-has-unsupported: cart->cart, bag->bag "
                                         "[judge: there is no cart in the image]")
    assert log[(56013, 1)][3] == flagged[(56013, 1)][3]   # its own reason, as when flagged
    assert log[(97131, 1)][2] == "drop"   # the driver's caption goes whole, judge or not


def test_a_rerun_asks_nothing_and_a_capped_run_resumes_from_the_cache(data, store):
    asked: list = []
    with FakeOpenAIServer(answer=_script(asked)) as srv:
        _, capped = _run(store, "f1", data["gt"], srv, judge="undecided", max_calls=2)
        assert srv.calls == 2 and capped.extra["judge"]["not-judged"] == 2
        held = [r for r in _sentences(store, "f1").values() if "not-judged" in r[3]]
        assert len(held) == 2 and all(r[2] == "keep" and "undecided: " in r[3] for r in held)
        _, full = _run(store, "f2", data["gt"], srv, judge="undecided")
        assert srv.calls == 4 and full.extra["judge"]["cache_hits"] == 2   # 2 new questions
        _, again = _run(store, "f3", data["gt"], srv, judge="undecided")
        assert srv.calls == 4 and again.extra["judge"]["calls"] == 0
    assert len(set(asked)) == 4
    strip = {k: r[2:5] for k, r in _sentences(store, "f2").items()}
    assert strip == {k: r[2:5] for k, r in _sentences(store, "f3").items()}


def test_a_sentence_asked_twice_is_one_question(data, store, tmp_path):
    doubled = tmp_path / "twice.jsonl"
    line = json.dumps({"image_id": 97131, "caption": data["answers"][97131]})   # twice
    doubled.write_text(line + "\n" + line + "\n")
    store.add_set("t", doubled)
    with FakeOpenAIServer(answer=_script([])) as srv:
        _, summary = store.filter("t", "hallucination", "tf", chair_gt=data["gt"],
                                  object_mode="visual", action="flag", judge="undecided",
                                  judge_url=srv.base_url)
    assert srv.calls == 1 and summary.extra["judge"]["sentences"] == 2


def test_bad_judge_settings_and_a_dead_server_fail_in_one_line(data, store):
    with pytest.raises(InputError, match="unknown judge 'sometimes'"):
        store.filter("s", "hallucination", "f", chair_gt=data["gt"], object_mode="visual",
                     judge="sometimes")
    with FakeOpenAIServer(answer=lambda body: {"status": 500}) as srv:
        with pytest.raises(InputError, match="judge did not answer"):
            _run(store, "f", data["gt"], srv, judge="undecided", timeout_s=5.0)
    assert [s.name for s in store.sets()] == ["s"]   # nothing stored half


def test_the_command_line_flags_and_summary(data, tmp_path, monkeypatch, capsys):
    from capaudit.cli.main import main

    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    db = str(tmp_path / "c.duckdb")
    assert main(["sets", "add", "s", str(data["src"]), "--db", db]) == 0
    with FakeOpenAIServer(answer=_script([])) as srv:
        assert main(["filter", "run", "s", "--filter", "hallucination", "--out", "f",
                     "--chair-gt", data["gt"], "--object-mode", "visual", "--action", "flag",
                     "--judge", "undecided", "--judge-url", srv.base_url, "--db", db]) == 0
        assert srv.calls == len(UNDECIDED)
    out = capsys.readouterr().out
    assert "judge (undecided, openai judge" in out
    assert "4 sentence(s) asked in 4 question(s), 4 call(s), 0 from the cache: 3 " \
           "unsupported, 1 supported, 0 unanswered" in " ".join(out.split())
    assert main(["filter", "run", "s", "--filter", "hallucination", "--out", "g", "--chair-gt",
                 data["gt"], "--judge", "always", "--db", db]) == 2


def test_a_sharded_run_asks_the_same_sentences_and_logs_the_same(data, store, tmp_path):
    from capaudit.cli.main import main
    from capaudit.filters.logs import read_shard_log, sharded_run

    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "a.jsonl").write_text(data["src"].read_text())
    asked: list = []
    with FakeOpenAIServer(answer=_script(asked)) as srv:
        _run(store, "f", data["gt"], srv, judge="undecided")
        n_set = srv.calls
        db = str(tmp_path / "sh.duckdb")
        assert main(["filter", "run", "--shards", str(tmp_path / "shards"), "--out",
                     str(tmp_path / "clean"), "--filter", "hallucination", "--chair-gt",
                     data["gt"], "--object-mode", "visual", "--action", "flag", "--judge",
                     "undecided", "--judge-url", srv.base_url, "--db", db]) == 0
    assert n_set == len(UNDECIDED) and srv.calls == n_set   # the shard run: all from the cache
    from capaudit.store import Store

    with Store(db, read_only=True) as st:
        info = sharded_run(st, str(tmp_path / "clean"))
    rows = read_shard_log(info, None).to_pylist()
    want = _sentences(store, "f")
    assert [(r["image_id"], r["sentence_idx"], r["action"], r["reason"], r["critique"])
            for r in rows] == [k + v[2:5] for k, v in want.items()]


def test_a_judge_failing_midway_keeps_those_sentences_and_a_rerun_asks_only_them(data, store):
    """The server refuses the cart sentences (400) on the first run: kept, their reason says
    so; the rerun against a working server asks only those 3 (the other answer is cached)."""
    def refusing(body):
        text = body["messages"][-1]["content"]
        return {"status": 400} if "cart" in SENT.search(text).group(1) else "yes"

    with FakeOpenAIServer(answer=refusing) as srv:
        _, first = _run(store, "f1", data["gt"], srv, judge="undecided")
    assert (first.extra["judge"]["failed"], first.extra["judge"]["supported"]) == (3, 1)
    log = _sentences(store, "f1")
    failed = [k for k, r in log.items() if "[judge: failed" in r[3]]
    assert sorted(failed) == sorted(k for k in UNDECIDED if k[0] == 56013)
    assert all(log[k][2] == "keep" and "undecided: " in log[k][3] for k in failed)
    asked: list = []
    with FakeOpenAIServer(answer=_script(asked)) as srv:
        _, again = _run(store, "f2", data["gt"], srv, judge="undecided")
    assert len(asked) == 3 and all("cart" in s for s in asked)
    assert again.extra["judge"]["cache_hits"] == 1 and again.extra["judge"]["unsupported"] == 3
