"""The sentence memo (filters/sentence_memo) gives the whole-caption analysis exactly: on every
shared caption, in any order, warm or cold, and at the caption-wide rules."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from capaudit.filters.mention_scan import CaptionScan, ScanCache, scan_caption
from capaudit.filters.sentence_memo import SentenceMemo
from capaudit.text.objects import get_lexicon

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sentence_spans import _gpt4v_captions, needs_shared  # noqa: E402


def _same(memo: SentenceMemo, caption: str, scans: dict | None = None) -> bool:
    """The memo's answer equals the whole-caption scan (True), or it declined (False).
    ``scans`` keeps the whole-caption scans already computed (a pure function of the caption),
    for a second pass over the same captions."""
    got = memo.scan(caption)
    if got is None:
        return False
    if scans is None:
        want = scan_caption(caption, memo.mode, memo.negation)
    elif caption not in scans:
        want = scans[caption] = scan_caption(caption, memo.mode, memo.negation)
    else:
        want = scans[caption]
    assert CaptionScan(*got) == want, caption
    return True


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["reference", "corrected"])
def test_every_shared_caption_warm_and_shuffled(mode):
    from test_tokenize_exact import _shared_captions

    caps = _shared_captions()
    assert len(caps) > 90_000
    random.Random(3).shuffle(caps)
    memo = SentenceMemo(mode, negation=True, limit=50_000)
    scans: dict = {}
    answered = sum(_same(memo, c, scans) for c in caps)
    assert answered > 0.8 * len(caps)              # most captions take the memo's path
    again = sum(_same(memo, c, scans) for c in reversed(caps))   # every sentence known now
    assert again == answered


@needs_shared
@pytest.mark.parametrize("negation", [True, False])
def test_gpt4v_captions_and_rotated_copies(negation):
    """The benchmark's data: rotated copies repeat every sentence in another order; a small
    limit makes the memo forget and relearn on the way."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from filter_data import copy_caption

    caps = _gpt4v_captions()
    memo = SentenceMemo("corrected", negation, limit=300)
    answered = 0
    for k in range(3):
        for cap in caps:
            answered += _same(memo, copy_caption(cap, k) if k else cap)
            assert len(memo.known) <= 300
    assert answered > 0.8 * 3 * len(caps)


@pytest.mark.parametrize("mode", ["reference", "corrected"])
def test_the_toilet_rule_spans_sentences(mode):
    """A seat in a caption that names a toilet is the toilet's, even when a sentence with the
    seat alone was learned first (where the seat counts)."""
    memo = SentenceMemo(mode, negation=True)
    alone = memo.scan("A red seat by the wall.")
    assert [m.word for ms in alone[2].values() for m in ms] == ["seat"]
    spans, sents, by_sent, negated = memo.scan("A toilet in a bathroom. A red seat by the wall.")
    assert [(m.word, m.sentence_idx, m.token_idx) for ms in by_sent.values() for m in ms] \
        == [("toilet", 0, 1)]
    assert _same(memo, "A toilet in a bathroom. A red seat by the wall.")
    assert spans == [(0, 23), (24, 47)] and len(sents) == 2 and set(negated) == {0}


def test_negated_mentions_and_shifted_token_indices():
    memo = SentenceMemo("reference", negation=True)
    memo.scan("There is no dog here.")
    _, _, by_sent, negated = memo.scan("A cat sleeps. There is no dog here.")
    assert [(m.word, m.sentence_idx, m.token_idx) for ms in by_sent.values() for m in ms] \
        == [("cat", 0, 1), ("dog", 1, 3)]
    assert negated == {0: set(), 1: {3, 4}}


def test_a_sentence_that_may_join_the_next_is_analysed_whole(monkeypatch):
    lex = get_lexicon("corrected")
    assert lex.may_join(["a", "hot"]) and not lex.may_join(["a", "hot", "."])
    triple = next(iter(lex.triples))
    assert lex.may_join(["a", *triple[:2]]) and not lex.may_join(list(triple))
    assert not lex.may_join([])
    memo = SentenceMemo("corrected", negation=True)
    monkeypatch.setattr(type(lex), "may_join", lambda self, toks: True)
    assert memo.scan("A dog sits. A cat sits.") is None      # a join is possible: declined
    assert _same(memo, "A dog sits on a mat.")                # the last sentence joins nothing


def test_captions_off_the_fast_path_are_declined():
    memo = SentenceMemo("reference", negation=True)
    for cap in ('A sign reads "stop". A dog.', "A \u0130stanbul street. A car."):
        assert memo.scan(cap) is None
    assert memo.scan("") == ([], [], {}, {})


def test_the_filter_uses_it_across_batches():
    cache = ScanCache("reference", negation=True)
    cache.get("A cat sleeps. A dog runs.")
    cache.new_batch()
    assert "a dog runs." in cache.memo.known and not cache.scans
    assert cache.get("A dog runs. A cat sleeps.") == \
        scan_caption("A dog runs. A cat sleeps.", "reference", True)
