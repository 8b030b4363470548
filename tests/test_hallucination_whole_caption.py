"""When the filter's sentences and the mention extractor's sentences disagree, a mention
cannot be placed in its sentence, so the hallucination filter judges the caption whole: an
unsupported mention anywhere drops (or flags) every sentence, never the wrong one alone."""

from __future__ import annotations

from capaudit.filters.base import CaptionDoc
from capaudit.filters.hallucination import HallucinationFilter
from capaudit.filters.runner import apply_filter
from capaudit.text.mentions import caption_mentions

EVIDENCE = {5: {"dog": 1.0, "couch": 1.0}}     # image 5: a dog, a couch; no cat
# "İ" lowercases to two characters, so the filter's sentence spans come from the caption
# as written and the extractor's from its lowercased text: the spans see "2." as a
# sentence of its own (3 sentences), the extractor reads "2. a cat on the sofa ." (2)
SPLIT_APART = "A dog in İstanbul. 2. A cat on the sofa."
SPLIT_ALIKE = "A dog in Istanbul. 2. A cat on the sofa."


def _run(caption: str, action: str):
    # every mention judged, reference words: no parse needed (and none loaded)
    f = HallucinationFilter(EVIDENCE, action=action, non_visual="judge", object_mode="reference")
    return apply_filter(f, [CaptionDoc(0, 5, caption)])


def test_the_two_splits_disagree_on_this_caption():
    doc = CaptionDoc(0, 5, SPLIT_APART)
    assert len(doc.spans) == 3 and len(caption_mentions(SPLIT_APART)[0]) == 2, (
        "the splits now agree on this caption: choose another that splits apart")
    assert len(CaptionDoc(0, 5, SPLIT_ALIKE).spans) == len(caption_mentions(SPLIT_ALIKE)[0]) == 2


def test_an_unplaceable_unsupported_mention_drops_the_whole_caption():
    out = _run(SPLIT_APART, "drop-sentence")
    # the cat sentence must not survive: with the splits apart, every sentence goes
    assert out.captions.num_rows == 0
    assert out.log["action"] == ["drop", "drop", "drop"]
    assert all("cat->cat" in r for r in out.log["reason"])
    flagged = _run(SPLIT_APART, "flag")
    assert flagged.captions.column("caption").to_pylist() == [SPLIT_APART]
    assert flagged.log["action"] == ["flag", "flag", "flag"]


def test_with_the_splits_alike_only_the_unsupported_sentence_goes():
    out = _run(SPLIT_ALIKE, "drop-sentence")
    assert out.captions.column("caption").to_pylist() == ["A dog in Istanbul."]
    assert out.log["action"] == ["keep", "drop"]
    assert out.log["reason"] == ["supported: dog->dog", "unsupported: cat->cat"]
