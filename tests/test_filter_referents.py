"""Kept sentences whose referent the hallucination filter dropped are flagged for review."""

from __future__ import annotations

import json

from capaudit.filters.base import CaptionDoc
from capaudit.filters.hallucination import HallucinationFilter
from capaudit.filters.runner import apply_filter


def _by_sentence(out, row=0):
    return [(a, r) for r_idx, a, r in zip(out.log["row_idx"], out.log["action"],
                                          out.log["reason"]) if r_idx == row]


def test_sentence_referring_to_a_dropped_one_is_kept_and_flagged():
    """Image 1 has a dog and a couch: the cat sentence is dropped. "They" right after it is
    flagged (kept); "It is a sunny day." after a kept sentence, and the dummy "It seems"
    after a dropped one, are not."""
    evidence = {1: {"dog": 1.0, "couch": 1.0}}
    caption = ("It is a sunny day. A dog lies on a couch. Two cats sit beside it. "
               "They look sleepy. A cat plays. It seems quiet. A cat naps. "
               "The presence of these animals makes the room cozy.")
    out = apply_filter(HallucinationFilter(evidence), [CaptionDoc(0, 1, caption)])
    got = _by_sentence(out)
    assert [a for a, _ in got] == ["keep", "keep", "drop", "flag", "drop", "keep", "drop",
                                "flag"]
    assert got[3][1] == ("review: opens with 'They' right after dropped sentence 2 (its "
                         "referent may be gone)")
    assert got[7][1].startswith("review: opens with 'The presence of these' right after "
                                "dropped sentence 6")
    assert out.summary.extra["review"]["sentences"] == 2
    assert out.summary.reasons["review"] == 2
    # kept, not dropped: the flagged sentences are in the new caption, and say why
    new = out.captions.column("caption").to_pylist()[0]
    assert "They look sleepy." in new and "The presence of these animals" in new
    assert json.loads(out.captions.column("meta").to_pylist()[0])["flags"][0].startswith(
        "review: opens with 'They'")


def test_llava_detail_answers_filtered_with_instances_flag_orphans(shared):
    """LLaVA's 30 detailed descriptions (data/real) against the val2014 instances: two kept
    sentences open by referring back to a dropped one (row 21: "The presence of these
    elements ..." after the potted plants; row 26: "This shows ..."); "It seems the people
    might ..." (row 16) follows a dropped sentence too but its "it" refers to nothing."""
    from capaudit.filters.evidence import load_evidence

    recs = [json.loads(line) for line in
            shared("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl").open(encoding="utf-8")]
    docs = [CaptionDoc(i, int(r["id"]), r["output"])
            for i, r in enumerate(r for r in recs if r["type"] == "detail")]
    evidence = load_evidence("instances", shared("data", "coco2014",
                                                 "instance_categories_val2014.jsonl"))
    out = apply_filter(HallucinationFilter(evidence), docs)
    flagged = [(r, s, o) for r, s, a, o in zip(out.log["row_idx"], out.log["sentence_idx"],
                                               out.log["action"], out.log["original"])
               if a == "flag"]
    assert [(r, s) for r, s, _ in flagged] == [(21, 4), (26, 5)]
    assert flagged[0][2].startswith("The presence of these elements")
    assert flagged[1][2].startswith("This shows that some household items")
