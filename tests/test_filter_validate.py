"""``filter validate``'s arithmetic on hand-derived cases and its label readers on the real
published dev-set file (FaithScore's annotation, ../shared/data/human_labels)."""

from __future__ import annotations

import json
import math

import pytest

from conftest import shared_path

from capaudit.errors import InputError
from capaudit.filters.validate.align import sentence_labels, sentence_offsets
from capaudit.filters.validate.join import Matched, SetCaption, match_labels, merge_repeats
from capaudit.filters.validate.scores import (breakdown, confusion, graded_scores, level_scores,
                                              prf, spearman)
from capaudit.io.labels import LABEL_LAYOUTS, Labelled, read_labels


def faithscore():
    return shared_path("data", "human_labels", "faithscore_annotation.jsonl")


# -- arithmetic by hand ------------------------------------------------------------------
def test_confusion_and_prf_by_hand():
    labels = [1, 1, 1, 0, 0, 1, 0, 0, 0]
    flagged = [1, 0, 1, 1, 0, 0, 0, 0, 1]
    c = confusion(labels, flagged)
    assert c == {"tp": 2, "fp": 2, "fn": 2, "tn": 3}
    p, r, f = (float(v) for v in prf(c["tp"], c["fp"], c["fn"]))
    assert (p, r) == (0.5, 0.5) and f == pytest.approx(0.5)
    p, r, f = (float(v) for v in prf(3, 1, 5))   # P 3/4, R 3/8, F1 2*.75*.375/1.125 = 0.5
    assert (p, r, f) == (0.75, 0.375, pytest.approx(0.5))
    p, r, f = prf(0, 0, 4)                          # nothing flagged: P undefined, R 0, F1 0
    assert math.isnan(float(p)) and float(r) == 0.0 and float(f) == 0.0


def test_level_scores_n_and_image_bootstrap():
    labels = [1, 1, 0, 0, 1, 0]
    flagged = [1, 0, 1, 0, 1, 0]
    images = ["a", "a", "b", "b", "c", "d"]
    s = level_scores(labels, flagged, images, n_boot=200, seed=3)
    assert s["counts"] == {"tp": 2, "fp": 1, "fn": 1, "tn": 2}
    assert (s["precision"], s["recall"]) == (round(2 / 3, 6), round(2 / 3, 6))
    assert (s["n"], s["n_precision"], s["n_recall"], s["n_images"]) == (6, 3, 3, 4)
    lo, hi = s["ci"]["precision"]
    assert 0 <= lo <= s["precision"] <= hi <= 1
    assert s == level_scores(labels, flagged, images, n_boot=200, seed=3)   # seeded
    # resampling images, not sentences: one image holding every unit has a zero-width band
    # (tp 2, fp 1, fn 2: precision 2/3, recall 1/2, F1 4/7)
    one = level_scores([1, 1, 0, 0, 1, 1], flagged, ["x"] * 6, n_boot=50, seed=0)
    assert one["ci"]["precision"] == [pytest.approx(2 / 3)] * 2
    assert one["ci"]["recall"] == [pytest.approx(1 / 2)] * 2
    assert one["ci"]["f1"] == [pytest.approx(4 / 7)] * 2


def test_spearman_by_hand():
    # x ranks 1 2 3 4, y ranks 4 3 1 2: d = -3 -1 2 2, sum d^2 = 18, rho = 1 - 6*18/(4*15) = -0.8
    assert spearman([0.0, 0.25, 0.5, 1.0], [5, 4, 1, 2]) == pytest.approx(-0.8)
    # ties share their rank: x = 0 0 1 (ranks 1.5 1.5 3), y = 1 2 3 -> rho = 0.866...
    assert spearman([0, 0, 1], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    g = graded_scores([0.0, 0.25, 0.5, 1.0], [5, 4, 1, 2], ["a", "b", "c", "d"], 100, 0)
    assert g["spearman"] == pytest.approx(-0.8) and g["n"] == 4 and g["n_images"] == 4


def test_breakdown_counts_each_key():
    out = breakdown([1, 0, 1, 0], [1, 1, 0, 0], ["unsupported", "unsupported", "kept", "kept"])
    assert out == {"kept": {"tp": 0, "fp": 0, "fn": 1, "tn": 1},
                   "unsupported": {"tp": 1, "fp": 1, "fn": 0, "tn": 0}}


def test_reason_class_and_evidence_of_a_logged_reason():
    from capaudit.filters.validate.units import evidence_of, reason_class

    assert reason_class("unsupported: cat->cat; non-visual: bus->bus (purpose)") == "unsupported"
    assert reason_class("no object mention") == "no object mention"
    assert reason_class("") == "(none)"
    assert evidence_of("no-evidence", "chair-gt") == "none"
    assert evidence_of("unsupported: cat->cat", "instances") == "instances"


# -- alignment ---------------------------------------------------------------------------
CAPTION = "A dog runs. It chases a red ball. The sky is blue."


def _matched(lab: Labelled, actions=("keep", "flag", "keep")) -> Matched:
    texts = ["A dog runs.", "It chases a red ball.", "The sky is blue."]
    row = SetCaption(0, 1, "1", CAPTION, [(i, t, a, "") for i, (t, a) in
                                          enumerate(zip(texts, actions))])
    return Matched(lab, [row])


def test_sentence_offsets_are_the_log_slices():
    spans = sentence_offsets(CAPTION, ["A dog runs.", "It chases a red ball.", "The sky is blue."])
    assert spans == [(0, 11), (12, 33), (34, 50)]
    assert [CAPTION[a:b] for a, b in spans][1] == "It chases a red ball."


def test_spans_overlapping_sentence_boundaries():
    # [8, 14) covers "ns. It": the end of sentence 0 and the start of sentence 1
    lab = Labelled(1, "1", CAPTION, spans=[(8, 14)])
    assert sentence_labels(_matched(lab)) == ([1, 1, 0], 0)
    # [11, 12) is the space between sentences 0 and 1: neither overlaps it
    assert sentence_labels(_matched(Labelled(1, "1", CAPTION, spans=[(11, 12)]))) == ([0, 0, 0], 0)
    # a span ending exactly where sentence 2 starts (end exclusive) does not touch it
    assert sentence_labels(_matched(Labelled(1, "1", CAPTION, spans=[(33, 34)]))) == ([0, 0, 0], 0)
    assert sentence_labels(_matched(Labelled(1, "1", CAPTION, spans=[(49, 50)]))) == ([0, 0, 1], 0)


def test_sentence_text_labels_find_their_sentence():
    lab = Labelled(1, "1", CAPTION, sentences=[("it  chases a RED ball.", 1),
                                               ("The sky is blue.", 0), ("A cat.", 1)])
    # found ignoring case and space width; "A cat." is not in the caption; sentence 0 unlabelled
    assert sentence_labels(_matched(lab)) == ([None, 1, 0], 1)


def test_any_action_but_keep_flags_and_the_removed_share():
    from capaudit.filters.validate.units import build_units

    lab = Labelled(4, "1", CAPTION, spans=[(0, 3)], grade=2.0)
    units, missing = build_units([_matched(lab, ("keep", "drop", "keep"))],
                                 ("caption", "sentence", "graded"), "chair-gt")
    assert missing == 0 and [u.flagged for u in units["sentence"]] == [False, True, False]
    assert [u.label for u in units["sentence"]] == [1, 0, 0]
    cap = units["caption"][0]
    assert cap.flagged and cap.action == "drop" and cap.label == 1 and cap.label_row == 4
    # the dropped sentence holds 21 of the 11 + 21 + 16 logged characters
    assert units["graded"][0].share == pytest.approx(21 / 48) and units["graded"][0].grade == 2
    units, _ = build_units([_matched(lab, ("keep", "revise", "keep"))], ("caption",), "x")
    assert units["caption"][0].flagged


# -- matching ----------------------------------------------------------------------------
def test_matching_reasons_and_repeats():
    rows = [SetCaption(0, 7, "7", "a dog."), SetCaption(1, 8, "8", "a cat.")]
    labs = [Labelled(1, "7", "a  dog. ", label=1), Labelled(2, "9", "x", label=0),
            Labelled(3, "8", "a bird.", label=1), Labelled(4, "000007", "a dog.", label=1)]
    m = match_labels(labs, rows, "error", "f")
    assert len(m.matched) == 1 and m.matched[0].rows == [rows[0]]
    assert dict(m.unmatched) == {"id-absent": 1, "caption-differs": 1}
    assert m.repeats["repeated_records"] == 1 and m.labelled == 3 and m.records == 4
    with pytest.raises(InputError, match="rows 1 and 2 label the caption of image 7"):
        merge_repeats([Labelled(1, "7", "a", label=1), Labelled(2, "7", "a", label=0)],
                      "error", "f")
    merged, rep, skipped = merge_repeats([Labelled(1, "7", "a", label=0),
                                          Labelled(2, "7", "a", label=1)], "any", "f")
    assert [x.label for x in merged] == [1] and rep["disagreeing"] == 1 and not skipped
    m = match_labels([Labelled(1, "7", "a dog.", label=0), Labelled(2, "7", "a dog.", label=1)],
                     rows, "skip", "f")
    assert not m.matched and dict(m.unmatched) == {"conflicting-duplicate": 1}


# -- readers on the real published file --------------------------------------------------
def test_faithscore_reader_counts_match_its_readme():
    reader, rows = read_labels(faithscore())          # sniffed
    assert reader.name == "faithscore" and len(rows) == 180
    assert len({r.image_id for r in rows}) == 30
    assert sum(r.label for r in rows) == 79           # records with a stage-2 fact of 0
    assert sum(r.notes["facts"] for r in rows) == 1380
    assert sum(r.notes["hallucinated_facts"] for r in rows) == 266
    assert sum(r.notes["facts"] == 0 for r in rows) == 16
    merged, rep, _ = merge_repeats(rows, reader.repeats, faithscore())
    assert len(merged) == 171 and sum(r.label for r in merged) == 78
    assert rep["repeated_records"] == 9 and rep["disagreeing"] == 2


def _records():
    return [json.loads(line) for line in faithscore().read_text().splitlines()]


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("layout", ["caption-label", "yes-no", "graded", "tokens", "spans"])
def test_each_layout_reads_the_dev_set_answers(tmp_path, layout):
    """Each layout over the real answers: the caption-level label it gives back is the
    FaithScore label (a graded one: 5 minus the wrong facts)."""
    recs = _records()
    want = [int(0 in r["stage 2"].values()) for r in recs]
    out = []
    for r, lab in zip(recs, want):
        base = {"image_id": r["id"], "caption": r["answer"]}
        words = r["answer"].split()
        if layout == "caption-label":
            out.append({**base, "label": lab})
        elif layout == "yes-no":
            out.append({**base, "hallucinated": "yes" if lab else "no"})
        elif layout == "graded":
            out.append({**base, "grade": 5 - min(4, list(r["stage 2"].values()).count(0))})
        elif layout == "tokens":
            out.append({**base, "tokens": words, "labels": [lab] + [0] * (len(words) - 1)})
        else:
            out.append({**base, "spans": [[0, len(words[0])]] if lab else []})
    reader, rows = read_labels(_write(tmp_path / "l.jsonl", out))
    assert reader.name == layout and len(rows) == 180
    if layout == "graded":
        assert [5 - r.grade for r in rows] == [min(4, list(x["stage 2"].values()).count(0))
                                               for x in recs]
    else:
        assert [r.caption_label() for r in rows] == want
    if layout in ("tokens", "spans"):
        assert all(r.spans in ([], [(0, len(r.caption.split()[0]))]) for r in rows)


def test_sentence_layout_and_csv(tmp_path):
    recs = _records()[:3]
    path = tmp_path / "s.csv"
    import csv

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, ["image_id", "caption", "sentence", "label"])
        w.writeheader()
        for r in recs:
            w.writerow({"image_id": r["id"], "caption": r["answer"],
                        "sentence": r["answer"].split(". ")[0], "label": 1})
    reader, rows = read_labels(path)
    assert reader.name == "sentence-label" and rows[0].row == 2
    assert rows[0].sentences == [(recs[0]["answer"].split(". ")[0], 1)]


def test_every_layout_is_registered_and_sniffs_alone():
    names = set(LABEL_LAYOUTS.names())
    assert names == {"caption-label", "sentence-label", "spans", "tokens", "yes-no", "graded",
                     "faithscore"}
    samples = {"caption-label": {"image_id", "caption", "label"},
               "sentence-label": {"image_id", "caption", "sentence", "label"},
               "spans": {"image_id", "caption", "spans"},
               "tokens": {"image_id", "caption", "tokens", "labels"},
               "yes-no": {"image_id", "caption", "foil", "id"},
               "graded": {"image_id", "caption", "rating"},
               "faithscore": {"id", "answer", "stage 1", "stage 2"}}
    for name, keys in samples.items():
        assert [n for n in names if LABEL_LAYOUTS.get(n).sniff(keys)] == [name]


@pytest.mark.parametrize("content,message", [
    ("", "the label file is empty"),
    ('{"x": 1, "y": 2}\n', "unknown label layout"),
    ('{"image_id": 1, "caption": "a dog", "spans": [[2, 6]]}\n', "runs past the end"),
    ('{"image_id": 1, "caption": "a dog", "spans": [[3, 3]]}\n', "empty or negative"),
    ('{"image_id": 1, "caption": "a dog", "label": 7}\n', "not 0/1"),
    ('{"image_id": 1, "caption": "a dog", "tokens": ["a", "cat"], "labels": [0, 1]}\n',
     "not in the caption"),
    ('{"image_id": 1, "caption": "a dog", "label": 1}\nnot json\n', "row 2: not a JSON"),
])
def test_bad_label_files_name_file_row_and_fix(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=message) as exc:
        read_labels(path)
    assert "bad.jsonl" in str(exc.value) and "fix:" in str(exc.value)


def test_a_span_may_end_at_the_end_of_the_caption(tmp_path):
    path = _write(tmp_path / "s.jsonl", [{"image_id": 1, "caption": "a dog", "spans": [[2, 5]]}])
    assert read_labels(path)[1][0].spans == [(2, 5)]


def test_unknown_layout_name_is_refused(tmp_path):
    path = _write(tmp_path / "l.jsonl", [{"image_id": 1, "caption": "a", "label": 1}])
    with pytest.raises(Exception, match="label layout"):
        read_labels(path, "no-such-layout")


def test_held_out_images_are_the_documented_ones():
    """docs/filters.md names the 10 held-out dev images; the script must keep those aside."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "benchmarks"))
    from dev_set_table import image_split

    ids = {r["id"] for r in _records()}
    split = image_split(ids)
    assert len(split["tune"]) == 20 and len(split["held-out"]) == 10
    assert not set(split["tune"]) & set(split["held-out"])
    doc = " ".join((root / "docs" / "filters.md").read_text().split())
    assert ", ".join(split["held-out"]) in doc
