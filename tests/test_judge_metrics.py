"""Judged-metric arithmetic against numbers computed by hand on small fixtures."""

from __future__ import annotations

import json
import math

import pytest

from capaudit.judge.dcscore import unit_scores
from capaudit.judge.factuality import summarize
from capaudit.judge.faithscore import caption_faithscore
from capaudit.judge.stats import cohen_kappa, macro_f1, rank_agreement, roc_auc, welch
from capaudit.judge.validate import agreement


def U(text, typ="object", rel=True):
    return {"text": text, "type": typ, "relevant": rel}


def test_dcscore_one_to_many_weighting_by_hand():
    gen = [U("a"), U("b", "attribute"), U("c", "count"), U("d", rel=False)]
    ref = [U("x"), U("y", "attribute"), U("z", "count"), U("w", rel=False)]
    pairs = [(0, 0), (0, 1), (1, 1), (3, 2)]  # (3, 2): an irrelevant unit never counts
    s = unit_scores(gen, ref, pairs, {2: False})
    # P = (a matched + b matched + c verified false) / 3 = 2/3
    # R: x gets 1/2 (a matches two units), y gets 1/2 + 1 -> capped at 1, z gets 0 -> 1.5/3
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == pytest.approx(0.5)
    assert s["f1"] == pytest.approx(4 / 7)
    assert s["by_type"]["count"] == [0.0, 1, 0.0, 1]        # c wrong; z not covered
    assert s["by_type"]["object"] == [1.0, 1, 0.5, 1]
    # an unverifiable unmatched unit is unknown, not wrong
    s = unit_scores(gen, ref, pairs, {2: None})
    assert s["precision"] == 1.0 and s["p_den"] == 2
    assert unit_scores([], ref, [], {})["precision"] is None


def test_faithscore_caption_and_sentence_level_by_hand():
    # facts per sentence: [T, F], [T], [] (not descriptive), [unknown, T]
    fs, sl = caption_faithscore([[True, False], [True], [], [None, True]])
    assert fs == pytest.approx(3 / 4) and sl == pytest.approx(1 / 2)
    assert caption_faithscore([[], []]) == (None, None)


def test_factuality_docci_criteria_by_hand():
    rows = [  # caption 0 (image 1): yes, no; caption 1 (image 1): yes, yes;
              # caption 2 (image 2): yes, unparsed
        {"caption_idx": 0, "score": 1.0, "status": "ok"}, {"caption_idx": 0, "score": 0.0, "status": "ok"},
        {"caption_idx": 1, "score": 1.0, "status": "ok"}, {"caption_idx": 1, "score": 1.0, "status": "ok"},
        {"caption_idx": 2, "score": 1.0, "status": "ok"}, {"caption_idx": 2, "score": None, "status": "unparsed"}]
    out = summarize(rows, [1, 1, 2], n_boot=200, seed=0)
    m = out["metrics"]
    assert m["response_correct"]["value"] == pytest.approx(1 / 2) and m["response_correct"]["n"] == 2
    assert m["sentence_correct"]["value"] == pytest.approx(4 / 5)
    assert m["caption_share"]["value"] == pytest.approx(2.5 / 3)
    # two images: a resample is {1,1}, {1,2} or {2,2}: 3/4, 4/5 or 1
    assert 0.75 - 1e-9 <= m["sentence_correct"]["ci_low"] <= m["sentence_correct"]["ci_high"] <= 1.0
    assert out["counts"] == {"ok": 5, "unparsed": 1}
    assert out["captions"][2]["all_factual"] is None  # the unparsed sentence may hide an error


def test_agreement_statistics_by_hand():
    assert roc_auc([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1]) == pytest.approx(3 / 4)
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    assert macro_f1([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx((2 / 3 + 4 / 5) / 2)
    r = rank_agreement([0.1, 0.2, 0.3], [0.3, 0.2, 0.1])
    assert r["spearman"] == pytest.approx(-1) and r["kendall"] == pytest.approx(-1)
    w = welch([1, 2, 3], [4, 5, 6, 7])
    # va = 1/3, vb = (5/3)/4 = 5/12; t = -3.5 / sqrt(3/4); df = (3/4)^2 / ((1/3)^2/2 + (5/12)^2/3)
    assert w["t"] == pytest.approx(-3.5 / math.sqrt(0.75))
    assert w["df"] == pytest.approx(0.5625 / ((1 / 9) / 2 + (25 / 144) / 3))
    from scipy.stats import ttest_ind

    assert w["p"] == pytest.approx(ttest_ind([1, 2, 3], [4, 5, 6, 7], equal_var=False).pvalue)
    a = agreement([1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 1, 1], [0.9, 0.4, 0.3, 0.1, 0.8, 0.6],
                  ["s1", "s1", "s2", "s2", "s3", "s3"])
    assert a["systems"]["s1"] == {"labels": 1.0, "judge": 0.5, "n": 2}
    assert a["accuracy"] == pytest.approx(4 / 6) and a["n_systems"] == 3


def test_capability_precision_hit_kt_bar_with_scripted_judge(tmp_path, store):
    from capaudit.enrich.testing import FakeOpenAIServer
    from capaudit.judge import Judge, JudgeConfig
    from capaudit.judge.capability import compute
    from capaudit.judge.evidence import Captions
    from judge_script import scripted_answer

    ann = tmp_path / "ann.jsonl"
    ann.write_text("\n".join(json.dumps(x) for x in [
        {"image_id": 1, "dimension": "color", "element": "red bus"},      # COR
        {"image_id": 1, "dimension": "color", "element": "blue car"},     # MISS
        {"image_id": 1, "dimension": "object", "element": "street"},      # COR
        {"image_id": 1, "dimension": "object", "element": "bus stop"}]))  # INC
    qa = tmp_path / "qa.jsonl"
    qa.write_text("\n".join(json.dumps({**x, "correct": True}) for x in [
        {"image_id": 1, "dimension": "color", "element": "red bus"},
        {"image_id": 1, "dimension": "color", "element": "blue car"}]))
    sets = [Captions("m", [1], ["a red bus on a street"], "test")]
    cfg = {"annotations": str(ann), "qa": str(qa), "n_boot": 50, "seed": 0}
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        j = Judge(JudgeConfig(model="j", url=srv.base_url, cache=None))
        out = compute(j, sets, None, cfg)
    v = out.values["m"]
    assert v["color.precision"]["value"] == 1.0 and v["color.hit"]["value"] == 0.5
    assert v["object.precision"]["value"] == 0.5 and v["object.hit"]["value"] == 0.5
    assert v["average.precision"]["value"] == 0.75 and v["average.hit"]["value"] == 0.5
    assert v["color.kt_bar"]["value"] == 0.5  # knows 'blue car' (QA) but does not tell it
    assert [r["label"] for r in out.items["m"]] == ["COR", "MISS", "COR", "INC"]


def test_judged_metrics_are_spec_metrics_with_the_stored_names():
    from capaudit.metrics.spec import default_metrics, metric_spec

    rows = [{"caption_idx": 0, "score": 1.0, "status": "ok"}]
    for name in summarize(rows, [1], n_boot=10)["metrics"]:
        spec = metric_spec(f"factuality.{name}")
        assert spec is not None and "judge" in spec.needs and not spec.streams
    assert metric_spec("capscore.semantic").criterion == "alignment"
    assert metric_spec("dcscore.har.hallucination").direction == -1
    assert not any(m.startswith(("factuality", "dcscore", "capscore")) for m in default_metrics())
