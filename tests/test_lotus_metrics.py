"""LOTUS metrics through the engine, audit run, disparity and leaderboard: values against
hand counts, streaming = in-memory, bad input = one line, exit 2, nothing stored."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capaudit.cli.main import main
from capaudit.io.annotation_files import Annotations

pytestmark = pytest.mark.slow   # spaCy model load and parses: ~1 min on 2 busy cores
pytest.importorskip("spacy")

CAPS = ["A dog catches a frisbee in the park.", "A nude statue stands in a garden.",
        "Two dogs run.", "A woman holds an umbrella.", "A man rides a horse.",
        "The cocktail bar in Scunthorpe."]
IDS = [1, 1, 2, 3, 4, 5]
REF = [(1, "A dog jumps for a frisbee."), (1, "A dog plays in a park."),
       (2, "Dogs running on grass."), (3, "A lady with an umbrella."), (4, "A man on a horse.")]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n" for i, c in rows))
    return path


def test_stream_in_chunks_equals_in_memory():
    from capaudit.audit.engine import audit_captions, audit_stream

    names = ["nsfw_words", "syntactic_depth", "semantic_nodes", "gender_word_recall"]
    ann = Annotations(gender={1: "male", 3: "female", 4: "male"})
    one = audit_captions(IDS, CAPS, ann, names, n_boot=200, workers=1, config={}).results
    many = audit_stream(zip(IDS, CAPS), ann, names, n_boot=200, workers=1, chunk_size=2,
                        config={}).results
    for n in names:
        assert one[n].value == pytest.approx(many[n].value) and one[n].n == many[n].n, n
        assert (one[n].ci_low, one[n].ci_high) == pytest.approx((many[n].ci_low, many[n].ci_high))
    assert one["nsfw_words"].value == pytest.approx(100 / 6)          # only "nude"
    # labelled images 1 (male: 2 captions, no man word), 3 (female: "woman"), 4 (male: "man")
    assert one["gender_word_recall"].value == pytest.approx(100 * 2 / 4)
    assert one["gender_word_recall"].n == 4


def test_audit_run_coverage_against_hand_counts(tmp_path, capsys):
    caps = _jsonl(tmp_path / "caps.jsonl", list(zip(IDS, CAPS)))
    ref = _jsonl(tmp_path / "ref.jsonl", REF)
    out = tmp_path / "r.json"
    db = tmp_path / "a.duckdb"
    code = main(["audit", "run", str(caps), "--metrics", "noun_precision,noun_recall,nsfw_words",
                 "--reference", str(ref), "--n-boot", "50", "--json", str(out), "--db", str(db)])
    assert code == 0, capsys.readouterr().err
    got = json.loads(out.read_text())["sets"]["caps"]
    from capaudit.metrics.features.word_coverage import coverage, reference_words
    from capaudit.metrics.features.parse import parse_features

    feats = parse_features([c for _, c in REF])
    refw = reference_words([i for i, _ in REF], feats, "nouns")
    rec, prec = coverage(IDS, parse_features(CAPS), "nouns", refw)
    assert got["noun_precision"]["value"] == pytest.approx(100 * np.nanmean(prec))
    assert got["noun_recall"]["value"] == pytest.approx(100 * np.nanmean(rec))
    assert got["noun_recall"]["n"] == 5                       # image 5 has no reference
    # caption 0 "dog, frisbee, park" against refs of image 1 {dog, frisbee, park}: all covered
    assert prec[0] == 1.0 and rec[0] == 1.0
    from capaudit.store import Store

    with Store(db) as s:   # per-caption detail rows, and the parses cached
        rows = s.sql("SELECT nsfw_hits FROM caption_details WHERE set_name = 'caps' "
                     "ORDER BY row_idx")
        assert [r[0] for r in rows][1] == ["nude"] and rows[5][0] == []
        assert s.one("SELECT count(*) FROM parse_cache")[0] >= 10


@pytest.mark.parametrize("args,msg", [
    (["--reference", "nosuchset"], "neither a registered set nor a file"),
    (["--clip-model", "NOPE", "--images", "."], "is not a CLIP model"),
    (["--long-text", "squash"], "unknown --long-text 'squash'"),
])
def test_bad_lotus_inputs_exit_2_and_store_nothing(tmp_path, capsys, args, msg):
    caps = _jsonl(tmp_path / "caps.jsonl", list(zip(IDS, CAPS)))
    db = tmp_path / "a.duckdb"
    code = main(["audit", "run", str(caps), "--metrics", "noun_precision", *args,
                 "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and msg in err and "Traceback" not in err
    from capaudit.store import Store

    with Store(db) as s:
        assert s.one("SELECT count(*) FROM runs")[0] == 0


def test_leaderboard_cli_empty_caption_and_unknown_profile(tmp_path, capsys):
    good = _jsonl(tmp_path / "a.jsonl", list(zip(IDS, CAPS)))
    bad = _jsonl(tmp_path / "b.jsonl", [(1, "a dog"), (2, "")])
    db = tmp_path / "a.duckdb"
    code = main(["audit", "leaderboard", str(good), str(bad), "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and "b.jsonl" in err and "Traceback" not in err
    code = main(["audit", "leaderboard", str(good), str(good), "--db", str(db)])
    assert code == 2 and "named twice" in capsys.readouterr().err
    other = _jsonl(tmp_path / "c.jsonl", list(zip(IDS, CAPS[::-1])))
    code = main(["audit", "leaderboard", str(good), str(other), "--profile", "risky",
                 "--db", str(db)])
    assert code == 2 and "unknown profile 'risky'" in capsys.readouterr().err


def test_leaderboard_cli_stores_scores_and_writes_page(tmp_path, capsys):
    a = _jsonl(tmp_path / "a.jsonl", list(zip(IDS, CAPS)))
    b = _jsonl(tmp_path / "b.jsonl", [(i, "A dog.") for i in IDS])
    ref = _jsonl(tmp_path / "ref.jsonl", REF)
    db = tmp_path / "a.duckdb"
    code = main(["audit", "leaderboard", str(a), str(b), "--reference", str(ref),
                 "--metrics", "noun_precision,noun_recall,semantic_nodes,nsfw_words",
                 "--profile", "detail-oriented", "--n-boot", "50", "--html", str(tmp_path / "page"),
                 "--json", str(tmp_path / "lb.json"), "--db", str(db),
                 "--min-n", "1"])  # five images: ranked only when the user allows it
    out = capsys.readouterr().out
    assert code == 0, out
    assert "detail-oriented" in out and "dropped from the average" in out
    lb = json.loads((tmp_path / "lb.json").read_text())["leaderboard"]
    assert lb["profiles"]["detail-oriented"]["rank"] == [1, 2]   # richer captions win detail
    assert (tmp_path / "page" / "index.html").exists()
    from capaudit.store import Store

    with Store(db) as s:
        rows = s.sql("SELECT set_name, value, extra FROM metrics WHERE metric = 'n_avg' "
                     "AND grp = 'leaderboard:detail-oriented' ORDER BY set_name")
    assert [r[0] for r in rows] == ["a", "b"] and rows[0][1] > rows[1][1]
    assert json.loads(rows[0][2])["rank"] == 1


def test_leaderboard_sets_read_in_chunks_equal_one_chunk(tmp_path):
    from capaudit.audit.engine import point_value
    from capaudit.leaderboard.runner import DEFAULTS, evaluate_set

    path = _jsonl(tmp_path / "a.jsonl", list(zip(IDS, CAPS)))
    names = ["nsfw_words", "semantic_nodes", "chair_s"]
    ann = Annotations(chair_gt={i: frozenset({"dog"}) for i in range(1, 6)})
    one = evaluate_set(None, str(path), ann, dict(DEFAULTS, workers=1), names)
    many = evaluate_set(None, str(path), ann, dict(DEFAULTS, workers=1, chunk_size=2), names)
    for n in names:
        assert point_value(one.estimates[n]) == pytest.approx(point_value(many.estimates[n]))
        np.testing.assert_allclose(one.estimates[n].stats, many.estimates[n].stats)
    # worst captions: the horse caption hallucinates (ground truth: dog only); "nude" is a hit
    kinds = {(w["kind"], w["row"]) for w in many.worst}
    assert ("nsfw", 1) in kinds and ("chair", 4) in kinds
    assert [w["row"] for w in one.worst] == [w["row"] for w in many.worst]


def test_disparity_gives_lotus_rec_m_rec_f_and_the_gap():
    from capaudit.audit.disparity import audit_disparity

    ann = Annotations(gender={1: "male", 3: "female", 4: "male"})
    d = audit_disparity(IDS, CAPS, ann, by="gender", metrics=["gender_word_recall", "nsfw_words"],
                        n_boot=100, workers=1, config={})
    rec = d.results["gender_word_recall"]
    # men's images: 1 (two captions without a man word) and 4 ("A man rides"): 1 of 3
    assert rec["male"].value == pytest.approx(100 / 3) and rec["male"].n == 3
    assert rec["female"].value == pytest.approx(100.0) and rec["female"].n == 1
    assert rec["male-female"].value == pytest.approx(100 / 3 - 100)
    assert d.results["nsfw_words"]["male"].value == pytest.approx(100 / 3)   # "nude", image 1
