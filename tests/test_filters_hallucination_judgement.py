"""The hallucination filter, honest about what it judges.

Compound modifiers ("passenger airplanes") in corrected mode, non-visual
mentions (generic / hypothetical clauses), the evidence and its coverage,
the independent before/after score, and the sentence log.
Expectations are derived by hand from the sentences; the LLaVA ones were
read one by one (data/real/llava_coco2014_val_gpt4_qa_30x3.jsonl).
"""

from __future__ import annotations

import json
from itertools import islice

import pytest

from capaudit.errors import InputError
from capaudit.filters.base import CaptionDoc
from capaudit.filters.hallucination import HallucinationFilter, load_evidence
from capaudit.filters.runner import apply_filter

pytest.importorskip("spacy", reason="the parse needs the nlp extra")


def _run(gt, captions, image_id=1, **opts):
    docs = [CaptionDoc(i, image_id, c) for i, c in enumerate(captions)]
    return apply_filter(HallucinationFilter(gt, **opts), docs)


# -- compound modifiers --------------------------------------------------------------
def test_passenger_airplanes_kept_in_corrected_mode_only():
    gt = {1: {"airplane": 1.0}}   # the image has airplanes and no person
    caps = ["There are two large passenger airplanes visible.",
            "Two passenger jets wait on the tarmac."]
    ref = _run(gt, caps, object_mode="reference")
    # reference mode stays the reference: "passenger" alone is a person word there,
    # "passenger jet" is one of its two-word entries (-> jet)
    assert ref.log["action"] == ["drop", "keep"]
    assert ref.log["reason"][0] == "unsupported: passenger->person"
    cor = _run(gt, caps, object_mode="corrected")
    assert cor.log["action"] == ["keep", "keep"]
    assert cor.log["reason"][0] == ("modifier: passenger->person (modifies airplanes); "
                                    "supported: airplane->airplane")
    assert cor.summary.extra["parse"]["modifier_sentences"] == 1


@pytest.mark.parametrize("caption, evidence, kept", [
    ("a dog bed next to a car seat .", {"bed", "chair"}, True),      # dog, car modify
    ("a computer keyboard on the floor .", {"keyboard"}, True),       # not a laptop
    ("an orange umbrella on the beach .", {"umbrella"}, True),       # a colour, not fruit
    ("a dog house in the yard .", {"bed"}, False),                   # "house" is no object
    ("a dog sleeps on a bed .", {"bed"}, False),                     # a real dog claim
])
def test_object_word_modifying_an_object_word(caption, evidence, kept):
    out = _run({1: dict.fromkeys(evidence, 1.0)}, [caption], object_mode="corrected")
    assert (out.log["action"] == ["keep"]) is kept, out.log["reason"]


def test_passenger_airplanes_in_real_llava_answer(shared):
    """The reported case: LLaVA's answer for image 258285 under the CHAIR ground truth."""
    gt = load_evidence("chair-gt", shared("data", "coco2014", "chair_objects_trainval2014.jsonl"))
    sent = "There are two large passenger airplanes visible in the image."
    docs = [d for d in _llava_docs() if sent in d.caption]
    assert len(docs) == 1 and "person" not in gt[docs[0].image_id]
    ref = apply_filter(HallucinationFilter(gt, object_mode="reference"), docs)
    assert ref.log["reason"] == ["unsupported: passenger->person"]
    cor = apply_filter(HallucinationFilter(gt), docs)   # corrected: the default (#34.4)
    assert cor.log["action"] == ["keep"] and cor.log["reason"][0].startswith(
        "modifier: passenger->person (modifies airplanes)")


# -- non-visual mentions ---------------------------------------------------------------
@pytest.mark.parametrize("sentence, word, reason", [
    ("The umbrellas are placed to protect people from sunlight.", "person", "prospective"),
    ("Umbrellas are placed to shade the children.", "person", "purpose"),
    ("It provides shade, which helps protect people from direct sunlight.", "person",
     "prospective"),
    ("The colorful display attracts buyers.", "person", "prospective"),
    ("A bus, which is often used for transporting passengers.", "person", "use"),
    ("The scene suggests the presence of people nearby.", "person", "inferred"),
    ("If it rains, people might open umbrellas.", "umbrella", "hypothetical"),
    ("A man might be waiting for a bus.", "bus", "hypothetical"),
    ("A man might be waiting for a bus.", "person", None),        # the subject is claimed
    ("A person can be seen in the background.", "person", None),  # perception: a claim
    ("A dog jumps to catch a frisbee.", "frisbee", None),         # purpose of a depicted act
    ("The cat may have chosen to sleep on the red couch.", "couch", None),  # not a passive
    ("A van made to look like a bus.", "bus", "purpose"),
    ("People can sit on the bench.", "bench", None),              # a definite thing
    ("A man shields a child from the rain.", "person", None),     # determined object
])
def test_non_visual_rule(sentence, word, reason):
    gt = {1: {}}   # nothing is supported: every mention is judged or excused
    out = _run(gt, [sentence], object_mode="corrected")
    why = out.log["reason"][0]
    excused = [p for p in why.split("; ") if p.startswith("non-visual:")]
    hit = [p for p in excused if f"->{word} (" in p]
    if reason is None:
        assert not hit, why
    else:
        assert hit and f"({reason}:" in hit[0], why


def test_non_visual_modes_keep_flag_judge():
    gt = {1: {"umbrella": 1.0}}
    caps = ["The umbrellas are placed to protect people from sunlight."]
    keep = _run(gt, caps)
    assert keep.log["action"] == ["keep"]
    assert keep.log["reason"][0] == ("non-visual: person->person (prospective: protect people); "
                                     "supported: umbrella->umbrella")
    flag = _run(gt, caps, non_visual="flag")
    assert flag.log["action"] == ["flag"] and flag.summary.captions_out == 1
    judge = _run(gt, caps, non_visual="judge")
    assert judge.log["action"] == ["drop"] and judge.summary.captions_out == 0
    with pytest.raises(InputError, match="non-visual"):
        HallucinationFilter(gt, non_visual="ignore")


def _llava_docs(kind=None):
    from tests.conftest import shared_path

    path = shared_path("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
    recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [CaptionDoc(i, int(r["image"].rsplit("_", 1)[1].split(".")[0]), r["output"])
            for i, r in enumerate(recs) if kind is None or r["type"] == kind]


@pytest.fixture(scope="module")
def instances():
    from tests.conftest import shared_path

    return load_evidence("instances", shared_path("data", "coco2014",
                                                  "instance_categories_val2014.jsonl"))


def test_non_visual_on_real_llava_answers(instances):
    """Every sentence the rule excuses in LLaVA's 90 GPT-4 answers, read by hand: none of
    them claims the excused object is in the image."""
    docs = _llava_docs()
    out = apply_filter(HallucinationFilter(instances, object_mode="corrected"), docs)
    excused = sorted(o for o, r in zip(out.log["original"], out.log["reason"])
                     if r and r.startswith("non-visual"))
    expected = [
        ("In the image, the car is parked next to two parking meters, which indicates that the "
         "driver has parked the car"),
        "Moreover, the tree can contribute to the local ecosystem by supporting insects, birds",
        "Parking meters are commonly used in urban and commercial areas",
        "The car might be parked there so the driver or passengers can go",
        "First, it provides shade from the sun, which helps protect people from direct sunlight",
        ("The suitcases also differ in color, featuring black, brown, and yellow tones, which may "
         "attract buyers"),
        "Thus, the box offers a selection that caters to different preferences and invites people",
    ]
    assert len(excused) == len(expected)
    assert all(any(s.startswith(e) for s in excused) for e in expected), excused
    p = out.summary.extra["parse"]
    assert p["non_visual_sentences"] == 7 and p["non_visual_mentions"] == 8
    # judged anyway, the same sentences are dropped
    judged = apply_filter(HallucinationFilter(instances, object_mode="corrected",
                                              non_visual="judge"), docs)
    assert judged.summary.dropped == out.summary.dropped + 7
    # the 30 detailed descriptions state what is in the picture: nothing to excuse
    detail = apply_filter(HallucinationFilter(instances), _llava_docs("detail"))
    assert detail.summary.extra["parse"]["non_visual_mentions"] == 0


@pytest.mark.slow
def test_parse_gate_changes_nothing(shared):
    """Sentences are parsed only when a rule could fire; on real text, gated = ungated."""
    from capaudit.filters.parse import mention_notes
    from capaudit.text.mentions import caption_mentions

    with open(shared("data", "captioners", "nic_val2014_gender.jsonl"), encoding="utf-8") as fh:
        caps = [json.loads(line)["caption"] for line in islice(fh, 150)]
    caps += [d.caption for d in _llava_docs()]
    n_parsed = n_notes = 0
    for cap in caps:
        sents, ments = caption_mentions(cap, "corrected")
        for si, toks in enumerate(sents):
            starts = tuple(m.token_idx for m in ments if m.sentence_idx == si)
            if not starts:
                continue
            args = (tuple(toks), starts, "corrected", True, True)
            full = mention_notes(*args, gate=False)
            gated = mention_notes(*args)
            assert gated == full, (toks, gated, full)
            n_notes += sum(x is not None for x in full)
            n_parsed += 1
    assert n_parsed > 400 and n_notes > 30  # the comparison saw real notes


# -- evidence, coverage, independent score ---------------------------------------------
def test_report_names_evidence_and_its_coverage(tmp_path):
    gt_file = tmp_path / "gt.jsonl"
    gt_file.write_text(json.dumps({"image_id": 1, "objects": ["dog"]}) + "\n")
    docs = [CaptionDoc(0, 1, "a dog ."), CaptionDoc(1, 2, "a cat ."), CaptionDoc(2, None, "x .")]
    out = apply_filter(HallucinationFilter(chair_gt=str(gt_file)), docs)
    ev = out.summary.extra["evidence"]
    cats = ev.pop("categories")   # the file names one category: "dog"
    assert cats["present"] == 1 and cats["total"] == 80 and "dog" not in cats["missing"]
    assert cats["line"].startswith("1 of 80 COCO categories; missing: person, bicycle, car")
    assert ev == {"kind": "chair-gt", "source": f"file:{gt_file}", "images_in_evidence": 1,
                  "set_images": 2, "covered": 1, "coverage": 0.5,
                  "captions_without_image_id": 1}
    assert out.log["reason"][1:] == ["no-evidence", "no-evidence"]


@pytest.mark.slow
def test_chair_scores_reproduce_reference_chair(shared):
    """Scoring with the CHAIR ground truth gives the reference CHAIR_s / CHAIR_i exactly."""
    from capaudit.filters.rescore import chair_scores

    ref = json.loads(shared("references", "reference_metrics_visible.json").read_text())
    want = ref["reference_values"]["oscar_val2014_gender"]
    gt = load_evidence("chair-gt", shared("data", "coco2014", "chair_objects_trainval2014.jsonl"))
    with open(shared("data", "captioners", "oscar_val2014_gender.jsonl"), encoding="utf-8") as fh:
        docs = [CaptionDoc(i, r["image_id"], r["caption"])
                for i, r in enumerate(map(json.loads, fh))]
    got = chair_scores(docs, gt)
    assert got["captions"] == want["n"]
    assert got["chair_s"] == pytest.approx(want["chair_s"], abs=5e-4)
    assert got["chair_i"] == pytest.approx(want["chair_i"], abs=5e-4)


def test_parse_score_evidence(tmp_path):
    from capaudit.filters.rescore import parse_score_evidence

    det = tmp_path / "det.jsonl"
    det.write_text("")
    assert parse_score_evidence("instances") == ("instances", None)
    assert parse_score_evidence("instances", {"instances": "i.jsonl"}) == ("instances", "i.jsonl")
    assert parse_score_evidence("chair-gt=gt.jsonl") == ("chair-gt", "gt.jsonl")
    assert parse_score_evidence(str(det)) == ("detector", str(det))
    with pytest.raises(InputError, match="not an evidence"):
        parse_score_evidence("boxes")


@pytest.mark.slow
def test_cli_evidence_coverage_circularity_and_log(shared, tmp_path, capsys):
    from capaudit.cli.main import main
    from capaudit.store import Store

    src = tmp_path / "nic.jsonl"
    with open(shared("data", "captioners", "nic_val2014_gender.jsonl"), encoding="utf-8") as fh:
        src.write_text("".join(islice(fh, 120)))
    gt = str(shared("data", "coco2014", "chair_objects_trainval2014.jsonl"))
    inst = str(shared("data", "coco2014", "instance_categories_val2014.jsonl"))
    db = str(tmp_path / "t.duckdb")
    assert main(["sets", "add", "nic", str(src), "--db", db]) == 0
    capsys.readouterr()
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--chair-gt", gt,
                 "--out", "same", "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"evidence: chair-gt from file:{gt}: covers 120 of 120 images (100.0%)" in out
    assert "circular: same was filtered with chair-gt" in out
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--chair-gt", gt,
                 "--instances", inst, "--evidence", "chair-gt", "--score-evidence", "instances",
                 "--out", "indep", "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "circular" not in out and f"scored with instances from file:{inst}" in out
    with Store(db) as st:
        from capaudit.filters.runner import filter_run_info

        ind = filter_run_info(st, "indep")["summary"]["independent"]
    # the filter used the CHAIR ground truth; instance boxes still see hallucinations after
    assert ind["before"]["chair_s"] > ind["after"]["chair_s"] > 0
    assert ind["after"]["captions"] < ind["before"]["captions"] == 120
    # scoring with the filter's own evidence is said to be circular, and gives 0
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--chair-gt", gt,
                 "--score-evidence", "chair-gt", "--out", "circ", "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "CHAIR_s" in out and "circular: circ was filtered with chair-gt" in out
    # the log: full kept sentences with image ids
    assert main(["filter", "log", "indep", "--all", "--limit", "3", "--db", db]) == 0
    log = capsys.readouterr().out
    first = json.loads(src.read_text().splitlines()[0])
    assert str(first["image_id"]) in log
    assert first["caption"].split()[1] in log and "showing 3 of 120 rows" in " ".join(log.split())


def test_missing_spacy_names_the_extra(monkeypatch):
    import sys

    from capaudit.filters import parse

    parse._nlp.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)
    try:
        with pytest.raises(InputError, match=r"capaudit\[nlp\]"):
            HallucinationFilter({1: {}}).setup()
        # reference words and judged non-visual mentions need no parse
        HallucinationFilter({1: {}}, non_visual="judge", object_mode="reference").setup()
    finally:
        parse._nlp.cache_clear()


def test_independent_chair_with_a_detector(tmp_path):
    from capaudit.filters.evidence import resolve_evidence
    from capaudit.filters.rescore import independent_chair

    det = tmp_path / "det.jsonl"
    det.write_text(json.dumps({"image_id": 7, "detections": [
        {"label": "dog", "score": 0.9}, {"label": "cat", "score": 0.3}]}) + "\n")
    before = [CaptionDoc(0, 7, "a dog and a cat ."), CaptionDoc(1, 7, "a dog ."),
              CaptionDoc(2, 8, "a bird .")]            # image 8: no detections, not scored
    after = [CaptionDoc(0, 7, "a dog ."), CaptionDoc(1, 8, "a bird .")]
    ev, src = resolve_evidence("detector", str(det))
    got = independent_chair(before, after, "detector", ev, src, filter_kind="chair-gt",
                            filter_source="file:gt.jsonl")
    assert (got["set_images"], got["covered"], got["threshold"], got["circular"]) == (2, 1, 0.5,
                                                                                       False)
    # before: 1 of 2 captions has the 0.3 cat; 1 of 3 mentions is unsupported
    assert got["before"] == {"captions": 2, "chair_s": 50.0, "chair_i": 33.333,
                             "mentions_per_caption": 1.5}
    assert got["after"] == {"captions": 1, "chair_s": 0.0, "chair_i": 0.0,
                            "mentions_per_caption": 1.0}
    same = independent_chair(before, after, "detector", ev, src, filter_kind="detector",
                             filter_source=src)
    assert same["circular"]
