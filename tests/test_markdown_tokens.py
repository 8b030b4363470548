"""Markdown emphasis (``**a red car**``) takes the tokenizer's fast path, with NLTK's tokens.

LLM-written captions use it often (151 of the 238 segments of the 890 GPT-4V captions
that left the fast path did so for a ``*``), and the slow path costs ~100x the fast one per
sentence. NLTK pads every ``*`` with spaces and untrained Punkt never ends a sentence at one
(``**red car**.``: the period is a Punkt token alone, always a break); a ``*`` right after a
period, or in a word before one (``*x.``), is still left to NLTK. Checked against NLTK itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capaudit.text.fast_tokenize import fast_tokenize_caption
from capaudit.text.nltk_tokenize import nltk_line_tokens, nltk_tokenize_sentences
from capaudit.text.sentences import sentence_spans
from capaudit.text.tokenize import tokenize_caption

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hallucination_reference import punkt_reference  # noqa: E402


def _nltk(text: str):
    return nltk_tokenize_sentences(text), nltk_line_tokens(text)


@pytest.mark.parametrize("text, sentences", [
    ("a **red** car.", [["a", "*", "*", "red", "*", "*", "car", "."]]),
    ("**title:** a dog. *a* cat", [["*", "*", "title", ":", "*", "*", "a", "dog", "."],
                                   ["*", "a", "*", "cat"]]),
    ("x*y *", [["x", "*", "y", "*"]]),
])
def test_emphasis_takes_the_fast_path_with_nltks_tokens(text, sentences):
    fast = fast_tokenize_caption(text)
    assert fast is not None and fast[0] == sentences
    assert fast == _nltk(text)


@pytest.mark.parametrize("text, sentences", [
    ("a **red car**. the cup", [["a", "*", "*", "red", "car", "*", "*", "."], ["the", "cup"]]),
    ("**one**. **two**. x", [["*", "*", "one", "*", "*", "."], ["*", "*", "two", "*", "*", "."],
                             ["x"]]),
])
def test_emphasis_closing_a_sentence_takes_the_fast_path(text, sentences):
    """'**.': Punkt splits the stars off, so the period is a token alone, always a break."""
    fast = fast_tokenize_caption(text)
    assert fast is not None and fast[0] == sentences
    assert fast == _nltk(text)


@pytest.mark.parametrize("text", ["a car.** x", "a car .*", "a *x. the car", "a **b**c. the car"])
def test_a_star_touching_a_period_is_left_to_nltk(text):
    assert fast_tokenize_caption(text) is None
    assert tokenize_caption(text) == _nltk(text)


MD = ["**", "*", "**bold**", "**title:**", ". **", "**.", ":**", "** ", " *", "1. **a**",
      "- **x**:", "a**b", "**'s", "*\"", "\"*", "(*)", "*.", ".*", "? **", "**!", "a", "dog",
      "the", "car.", ". ", " ", "\n\n", ", ", "it's", "3.5"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(MD), max_size=30).map("".join))
def test_random_markdown_equals_nltk(text):
    low = text.lower()
    assert tokenize_caption(text) == _nltk(low)
    fast = fast_tokenize_caption(low)
    assert fast is None or fast == _nltk(low)
    assert sentence_spans(text) == punkt_reference(text)
