"""The hallucination filter's fast path decides exactly what the plain computation decides.

Every decision (action, reason, score), kept or revised text, sentence text (the log's
``original``), and the report's parse and review counts of
:class:`~capaudit.filters.hallucination.HallucinationFilter` are compared with
``tests/hallucination_reference.py`` (Punkt spans, the audit's mentions, one spaCy call per
sentence, the rules written out) on real files: the 890 GPT-4V ShareGPT4V captions and
rotated copies of them (the benchmark's data), LLaVA's GPT-4 answers, CapsFusion's LAION
captions, LLaMA-Factory's demo, a published captioner's captions, and hostile edge cases,
for every combination of object mode, non-visual mode, negation and action.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from itertools import islice, product
from pathlib import Path

import pytest

from capaudit.filters.base import CaptionDoc
from capaudit.filters.evidence import load_evidence
from capaudit.filters.hallucination import HallucinationFilter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hallucination_reference import reference_result  # noqa: E402

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
DATA = SHARED / "data"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA} "
                                "(set CAPAUDIT_SHARED)")
pytest.importorskip("spacy")

COMBOS = [dict(object_mode=m, non_visual=nv, negation=neg, action=act) for m, nv, neg, act in
          product(("reference", "corrected"), ("keep", "flag", "judge"), (True, False),
                  ("drop-sentence", "drop-caption", "flag"))]


def _gpt4v() -> list[tuple[int, str]]:
    rows = json.loads((DATA / "enriched" / "sharegpt4v_gpt4v_coco2017_890.json").read_text("utf-8"))
    return [(int(r["id"]), next(t["value"] for t in r["conversations"] if t["from"] == "gpt"))
            for r in rows]


def corpus() -> tuple[list[CaptionDoc], dict]:
    """Captions of every real file, with chair-gt evidence: COCO ids where the file has them;
    files without ids borrow the GPT-4V images' objects row by row (most of their mentions are
    then unsupported, which is what exercises the parse)."""
    gt = load_evidence("chair-gt", DATA / "coco2014" / "chair_objects_trainval2014.jsonl")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from filter_data import copy_caption

    gpt = _gpt4v()
    rows = [(iid, cap) for iid, cap in gpt]
    rows += [(iid, copy_caption(cap, k + 1)) for k, (iid, cap) in enumerate(gpt[:300])]
    with open(DATA / "real" / "llava_coco2014_val_gpt4_qa_30x3.jsonl", encoding="utf-8") as fh:
        rows += [(int(r["id"]), r["output"]) for r in map(json.loads, fh)]
    with open(DATA / "captioners" / "nic_val2014_gender.jsonl", encoding="utf-8") as fh:
        rows += [(r["image_id"], r["caption"]) for r in map(json.loads, islice(fh, 400))]
    foreign = [r["capsfuion_official"] for r in
               json.loads((DATA / "real" / "capsfusion_example_data.json").read_text("utf-8"))[:400]]
    for conv in json.loads((DATA / "real" / "llamafactory_mllm_demo.json").read_text("utf-8")):
        foreign += [m["content"] for m in conv["messages"] if m["role"] == "assistant"]
    foreign += ["", "   ", "no dog .", "A dog. These are cats. It is a bus!", "a cat" * 40,
                "The umbrellas are placed to protect people from sunlight. Passenger jets."]
    rows += [(gpt[i % len(gpt)][0], cap) for i, cap in enumerate(foreign)]
    # image 208549 (chair, cow, person): sentence-initial negation, a dropped referent, a
    # modifier, a purpose clause, repeated captions on two images
    rows += [(208549, cap) for cap in (
        "No dog is in the picture. A cow stands by a chair.",
        "A dog sleeps on the chair. It looks tired. The cow grazes.",
        "Passenger jets fly over the cow. Umbrellas are placed to protect people from rain.",
        "A man sits on a chair. A man sits on a chair.")]
    rows += [(25, "A man sits on a chair. A man sits on a chair.")]  # giraffe, person
    docs = [CaptionDoc(i, iid, cap) for i, (iid, cap) in enumerate(rows)]
    docs.append(CaptionDoc(len(docs), None, "A dog without an image id."))
    docs.append(CaptionDoc(len(docs), 999_999_999_999, "A dog on an image no evidence has."))
    return docs, gt


@pytest.fixture(scope="module")
def data():
    return corpus()


def _rows(result) -> list[tuple]:
    return [(d.sentence_idx, d.action, d.reason, d.score, d.revised, d.critique)
            for d in result.decisions]


def _check(docs: list[CaptionDoc], gt: dict, opts: dict) -> None:
    from capaudit.filters import parse

    if opts.get("action", "drop-sentence") == "drop-sentence":
        parse._NOTES.clear()  # every parse-relevant setting once through the batched parse
    filt = HallucinationFilter(gt, **opts)
    filt.setup(None)
    got = list(filt.apply(docs))
    assert [r.doc.row_idx for r in got] == [d.row_idx for d in docs]  # one each, in order
    ref_opts = {**filt.options, "threshold": filt.threshold}
    counts: Counter = Counter()
    for res, doc in zip(got, docs):
        fresh = CaptionDoc(doc.row_idx, doc.image_id, doc.caption)
        ref = reference_result(fresh, gt.get(doc.image_id) if doc.image_id is not None else None,
                               ref_opts, counts)
        assert res.doc.sentences == ref.doc.sentences and res.doc.spans == ref.doc.spans, doc
        assert _rows(res) == _rows(ref), (opts, doc.caption)
        assert (res.kept, res.text()) == (ref.kept, ref.text()), doc
    parse = filt.report["parse"]
    for key in ("non_visual_mentions", "non_visual_sentences", "modifier_mentions",
                "modifier_sentences"):
        assert parse[key] == counts[key], key
    assert filt.report["review"]["sentences"] == counts["review_sentences"]


@pytest.mark.slow
@pytest.mark.parametrize("opts", COMBOS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_every_option_combination_decides_as_the_plain_computation(data, opts):
    docs, gt = data
    _check(docs, gt, opts)


def test_default_options_decide_as_the_plain_computation(data):
    """The default run (reference objects, non-visual kept, negation on, drop-sentence) on
    every caption, and the report says the comparison met real notes and drops."""
    docs, gt = data
    _check(docs, gt, {})
    filt = HallucinationFilter(gt, object_mode="corrected", non_visual="flag")
    filt.setup(None)
    results = list(filt.apply(docs))
    acts = Counter(d.action for r in results for d in r.decisions)
    assert acts["drop"] > 500 and acts["flag"] > 50
    assert filt.report["parse"]["modifier_mentions"] > 10
    assert filt.report["parse"]["non_visual_mentions"] > 30
