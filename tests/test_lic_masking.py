"""Masking and tokenisation for LIC: whole lowercase tokens from the reference's lists."""

from capaudit.audit.lic.masking import (ATTRIBUTES, GENDER_WORDS, RACE_WORDS, mask_caption,
                                        mask_tokens, tokenize)


def test_gender_words_are_the_reference_lists():
    assert len(GENDER_WORDS) == 50
    assert {"man", "cowboy", "pregnant", "queens", "his", "hers"} <= GENDER_WORDS


def test_mask_caption_whole_lowercase_tokens():
    assert mask_caption("A Man and his dog", "genderword") == "a genderword and genderword dog"
    # substrings are never masked
    assert mask_caption("a manhole near the shepherd", "genderword") == "a manhole near the shepherd"
    # possessives split off by the tokenizer, the word itself is masked
    assert mask_caption("the woman's umbrella.", "[MASK]") == "the [MASK] 's umbrella ."
    assert mask_caption("", "genderword") == ""


def test_skin_tone_words_and_align_vocab():
    assert "black" in RACE_WORDS and ATTRIBUTES["skin_tone"][3] == "raceword"
    toks = tokenize("A black dog near a woman")
    assert mask_tokens(toks, "raceword", RACE_WORDS) == ["a", "raceword", "dog", "near", "a", "woman"]
    keep = {"a", "dog"}
    assert mask_tokens(toks, "genderword", GENDER_WORDS, keep=keep) == \
        ["a", "<unk>", "dog", "<unk>", "a", "genderword"]
