"""Filters: protocol, negation, hallucination (CHAIR_s -> 0 on real captioner outputs), CLI."""

from __future__ import annotations

import json
from itertools import islice

import pytest

from capaudit.filters.base import FILTERS, CaptionDoc, join_sentences
from capaudit.filters.hallucination import HallucinationFilter, load_evidence
from capaudit.text.mentions import caption_mentions, sentence_spans
from capaudit.filters.negation import negated_positions
from capaudit.filters.runner import apply_filter, log_counts, read_log

CAPTIONERS = ["nic_val2014_gender", "sat_val2014_gender", "att2in_val2014_gender",
              "updn_val2014_gender", "oscar_val2014_gender", "nic_plus_val2014_gender",
              "oscar_val2014_all"]  # every visible captioner file
N_PER_SET = 400  # a slice of each set keeps the test quick on shared CPUs


def _docs(path, n=N_PER_SET):
    with open(path, encoding="utf-8") as fh:
        recs = [json.loads(line) for line in islice(fh, n)]
    return [CaptionDoc(i, r["image_id"], r["caption"]) for i, r in enumerate(recs)]


@pytest.fixture(scope="module")
def chair_gt():
    from tests.conftest import shared_path

    return load_evidence("chair-gt", shared_path("data", "coco2014",
                                                 "chair_objects_trainval2014.jsonl"))


def _hallucinated(captions, ids, gt) -> int:
    """Captions with a mention not in the CHAIR ground truth (the audit's reference extractor)."""
    from capaudit.text.records import build_records

    rec = build_records(list(captions), mode="reference", workers=1)
    return sum(1 for i, iid in enumerate(ids)
               if any(m.category not in gt.get(iid, {}) for m in rec.mentions(i)))


# -- protocol -------------------------------------------------------------------------
def test_registry_lists_filters_and_suggests():
    from capaudit.errors import InputError

    assert {"hallucination", "gender-neutral", "gender-balance", "critique-revise"} <= set(FILTERS)
    with pytest.raises(InputError, match="did you mean 'hallucination'"):
        FILTERS.get("halucination")


def test_sentence_split_and_verbatim_join():
    cap = " a dog on a couch. a cat on a bed ."
    spans = sentence_spans(cap)
    assert [cap[a:b] for a, b in spans] == ["a dog on a couch.", "a cat on a bed ."]
    assert join_sentences(cap, spans, [cap[a:b] for a, b in spans]) == cap  # untouched bytes
    assert join_sentences(cap, spans, [None, cap[spans[1][0]:spans[1][1]]]) == "a cat on a bed ."
    # the mention sentence index agrees with the split
    sents, ments = caption_mentions(cap)
    assert len(sents) == len(spans)
    assert {(c, s) for c, _w, s, _t in ments} == {("dog", 0), ("couch", 0), ("cat", 1), ("bed", 1)}


def test_join_keeps_the_source_separators():
    cap = "A dog runs.  A cat sits.\n\nA car waits. A bus stops.\n"
    spans = sentence_spans(cap)
    sents = [cap[a:b] for a, b in spans]
    assert sents == ["A dog runs.", "A cat sits.", "A car waits.", "A bus stops."]
    # neighbours keep the text between them; a paragraph's last sentence dropped keeps
    # the break; the trailing newline stays with the last sentence
    assert join_sentences(cap, spans, [sents[0], None, sents[2], sents[3]]) == \
        "A dog runs.\n\nA car waits. A bus stops.\n"
    assert join_sentences(cap, spans, [sents[0], sents[1], None, sents[3]]) == \
        "A dog runs.  A cat sits.\n\nA bus stops.\n"
    assert join_sentences(cap, spans, [sents[0], "A cat naps.", sents[2], None]) == \
        "A dog runs.  A cat naps.\n\nA car waits."


# -- negation -------------------------------------------------------------------------
@pytest.mark.parametrize("sentence, word, negated", [
    ("a kitchen with no people in it", "people", True),
    ("a street without cars", "cars", True),
    ("the man is not holding a cup", "cup", True),
    ("there is no dog , but a cat sits on the bed", "cat", False),
    ("there is no dog , but a cat sits on the bed", "dog", True),
    ("a no parking sign next to a car", "car", False),
    ("a dog sitting on a couch", "dog", False),
    ("no cats or dogs in the room", "dogs", True),
    ("a bus that is not far from a car", "car", False),
])
def test_negation_scope(sentence, word, negated):
    toks = sentence.split()
    assert (toks.index(word) in negated_positions(toks)) is negated


def test_negated_mention_is_not_hallucination():
    gt = {1: {"person": 1.0}}
    docs = [CaptionDoc(0, 1, "a man in a room with no dogs ."),
            CaptionDoc(1, 1, "a man in a room with a dog .")]
    out = apply_filter(HallucinationFilter(gt), docs)
    assert out.captions.column("caption").to_pylist() == ["a man in a room with no dogs ."]
    log = out.log
    assert log["action"] == ["keep", "drop"]
    assert log["reason"][0] == "negated: dog; supported: man->person"
    off = apply_filter(HallucinationFilter(gt, negation=False), docs)
    assert off.summary.captions_out == 0


# -- hallucination ----------------------------------------------------------------------
def test_drop_sentence_keeps_supported_sentences():
    gt = {5: {"dog": 1.0, "couch": 1.0}}
    doc = CaptionDoc(0, 5, "A dog lies on a couch. A cat watches it. Nothing else happens.")
    out = apply_filter(HallucinationFilter(gt), [doc])
    assert out.captions.column("caption").to_pylist() == ["A dog lies on a couch. "
                                                          "Nothing else happens."]
    assert out.log["action"] == ["keep", "drop", "keep"]
    assert out.log["original"][1] == "A cat watches it."
    s = out.summary
    assert (s.sentences_in, s.kept, s.dropped) == (3, 2, 1)
    whole = apply_filter(HallucinationFilter(gt, action="drop-caption"), [doc])
    assert whole.summary.captions_out == 0 and whole.summary.dropped == 3
    flag = apply_filter(HallucinationFilter(gt, action="flag"), [doc])
    assert flag.captions.column("caption").to_pylist() == [doc.caption]
    assert json.loads(flag.captions.column("meta")[0].as_py())["flags"] == ["unsupported: cat->cat"]
    assert flag.log["action"] == ["keep", "flag", "keep"]


def test_detector_evidence_threshold(tmp_path):
    det = tmp_path / "det.jsonl"
    det.write_text(json.dumps({"key": "a", "image_id": 7, "detector": "ssd", "detections": [
        {"category": "dog", "score": 0.9, "box": [0, 0, 9, 9]},
        {"label": "tvmonitor", "score": 0.3}]}) + "\n"
        + json.dumps({"key": "b", "image_id": None, "detections": []}) + "\n")
    docs = [CaptionDoc(0, 7, "a dog watching tv ."), CaptionDoc(1, 7, "a dog on the grass .")]
    f = HallucinationFilter(evidence="detector", detections=str(det), min_score=0.5)
    out = apply_filter(f, docs)
    assert out.captions.column("caption").to_pylist() == ["a dog on the grass ."]
    assert out.log["reason"][0] == "unsupported: tv->tv" and out.log["score"][0] == 0.3
    low = apply_filter(HallucinationFilter(evidence="detector", detections=str(det),
                                           min_score=0.2), docs)
    assert low.summary.captions_out == 2


@pytest.mark.parametrize("model", CAPTIONERS)
def test_chair_gt_filter_gives_chair_s_zero(shared, chair_gt, model):
    path = shared("data", "captioners", f"{model}.jsonl")
    docs = _docs(path)
    before = _hallucinated([d.caption for d in docs], [d.image_id for d in docs], chair_gt)
    assert before > 0  # real model captions do hallucinate
    # judging every mention (as CHAIR does), the filter leaves no hallucination behind
    out = apply_filter(HallucinationFilter(chair_gt, non_visual="judge",
                                           object_mode="reference"), docs)
    caps = out.captions.column("caption").to_pylist()
    ids = out.captions.column("image_id").to_pylist()
    assert _hallucinated(caps, ids, chair_gt) == 0          # CHAIR_s = 0
    s = out.summary
    assert s.sentences_in == s.kept + s.dropped == len(out.log["action"])
    assert s.dropped >= before and s.captions_out == len(caps)
    # sparing non-visual mentions, what it leaves is exactly what it logged as non-visual
    out = apply_filter(HallucinationFilter(chair_gt, object_mode="reference"), docs)
    left = _hallucinated(out.captions.column("caption").to_pylist(),
                         out.captions.column("image_id").to_pylist(), chair_gt)
    excused = {r for r, a in zip(out.log["row_idx"], out.log["reason"])
               if a.startswith("non-visual")}
    assert left == len(excused) == out.summary.extra["parse"]["non_visual_sentences"]


def test_cli_run_and_log(shared, tmp_path, capsys):
    from capaudit.cli.main import main
    from capaudit.store import Store

    src = tmp_path / "nic.jsonl"
    with open(shared("data", "captioners", "nic_val2014_gender.jsonl"), encoding="utf-8") as fh:
        src.write_text("".join(islice(fh, 150)))
    gt = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    db = str(tmp_path / "t.duckdb")
    assert main(["sets", "add", "nic", str(src), "--db", db]) == 0
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--evidence", "chair-gt",
                 "--chair-gt", str(gt), "--out", "nic_clean", "--db", db]) == 0
    # unknown filter and an option the filter does not take: one line, exit 2
    assert main(["filter", "run", "nic", "--filter", "halucination", "--out", "x", "--db", db]) == 2
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--when", "always",
                 "--chair-gt", str(gt), "--out", "x", "--db", db]) == 2
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--chair-gt", str(gt),
                 "--out", "nic_clean", "--db", db]) == 2  # exists, no --replace
    err = capsys.readouterr().err
    assert "did you mean 'hallucination'" in err and "--when" in err and "--replace" in err
    assert main(["filter", "log", "nic_clean", "--db", db]) == 0
    assert "adds up" in capsys.readouterr().out
    with Store(db) as st:
        info = st.get_set("nic_clean")
        assert info.parent == "nic" and info.meta["filter"] == "hallucination"
        counts = log_counts(st, "nic_clean")
        assert counts["ok"] and counts["sentences_in"] == 150
        assert counts["captions_out"] == info.n_captions < 150
        dropped = read_log(st, "nic_clean")
        assert set(dropped.column("action").to_pylist()) == {"drop"}
        assert all(r.startswith("unsupported: ") for r in dropped.column("reason").to_pylist())
