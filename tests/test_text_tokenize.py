"""The tokenizer fast path must equal NLTK (untrained Punkt + NLTK word tokenizer) exactly."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from capaudit.text.tokenize import (fast_tokenize_caption, nltk_line_tokens, nltk_tokenize_sentences,
                                    _segmented_caption, tokenize, tokenize_caption)

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
DATA = SHARED / "data"
needs_shared = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA} "
                                  "(set CAPAUDIT_SHARED)")


def _slow(text: str):
    return nltk_tokenize_sentences(text), nltk_line_tokens(text)


def _all_shared_captions() -> list[str]:
    caps: dict[str, None] = {}
    for f in sorted((DATA / "captioners").glob("*.jsonl")):
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                caps[json.loads(line)["caption"]] = None
    coco = json.loads((DATA / "coco2014" / "captions_val2014_subset.json").read_text(encoding="utf-8"))
    for a in coco["annotations"]:
        caps[a["caption"]] = None
    return list(caps)


@needs_shared
def test_fast_path_equals_nltk_on_every_shared_caption():
    caps = _all_shared_captions()
    assert len(caps) > 40_000
    n_fast = 0
    for cap in caps:
        text = cap.lower()
        fast = fast_tokenize_caption(text)
        if fast is not None:
            n_fast += 1
            assert fast == _slow(text), cap
    assert n_fast / len(caps) > 0.98  # the fast path must actually be the common path


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_path_equals_nltk_on_random_text(seed):
    rng = random.Random(seed)
    pieces = ("a man dog's dogs table. it 's , . < > <unk> - x-ray 3 10 a. the bus ties st. "
              "mr. gonna 's, '' s 'st cannot don't can't n't they're i'm he'd you'll 'll o'neil "
              "10:30 a: b; c& $5 50% #1 @home (a) [b] {c} ) ( ] a/b :: ,: x). y) a.) 'n't "
              "rock'n'roll woman's man's. n's van'd ten'll won're can've n'").split(" ") \
        + [" ", "  ", "\t", "\n", ". ", ", ", "'s ", ": ", ". )", ".\n"]
    checked = 0
    for _ in range(4000):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        if rng.random() < 0.5:
            text = text.replace(" .", ".")
        if rng.random() < 0.2:
            text = text.replace(" ", "")
        fast = fast_tokenize_caption(text)
        if fast is not None:
            checked += 1
            assert fast == _slow(text), repr(text)
    assert checked > 500


@pytest.mark.parametrize("caption, sentences, line", [
    ("A dog.", [["a", "dog", "."]], ["a", "dog", "."]),
    ("A sign. The cake", [["a", "sign", "."], ["the", "cake"]], ["a", "sign.", "the", "cake"]),
    ("the child's cake, on a table .", [["the", "child", "'s", "cake", ",", "on", "a", "table", "."]],
     ["the", "child", "'s", "cake", ",", "on", "a", "table", "."]),
    ("a <unk> on it 's back", [["a", "<", "unk", ">", "on", "it", "'s", "back"]],
     ["a", "<", "unk", ">", "on", "it", "'s", "back"]),
    ("", [], []),
    ('A "Stop" sign, ("ok")."', None, None),
    ("At 10:30, 1,000 dogs: 3.", [["at", "10:30", ",", "1,000", "dogs", ":", "3", "."]],
     ["at", "10:30", ",", "1,000", "dogs", ":", "3", "."]),
    ("A dog... a cat?. Why,. Me.", [["a", "dog", "...", "a", "cat", "?", "."], ["why", ",", "."], ["me", "."]],
     ["a", "dog", "...", "a", "cat", "?", ".", "why", ",", ".", "me", "."]),
    ('"Joan\'s" sign by a "cafe".', [["``", "joan", "'s", "''", "sign", "by", "a", "``", "cafe", "''", "."]],
     ["``", "joan", "'s", "''", "sign", "by", "a", "``", "cafe", "''", "."]),
])
def test_known_cases(caption, sentences, line):
    if sentences is None:  # hand-checked against NLTK: the same, by the slow path
        sentences, line = _slow(caption.lower())
    assert tokenize_caption(caption) == (sentences, line)
    assert tokenize(caption) == [t for s in sentences for t in s]


def test_unusual_text_falls_back_to_nltk():
    for text in ["he cannot go", "1,,000 dogs.", "a dog.... a cat", "what? no!", "a. b?. c", "“quoted” text",
                 'a sign. "stop" it', 'a\n"stop" sign', "at 10:30. a", "a. b"]:
        assert fast_tokenize_caption(text) is None
        assert tokenize_caption(text) == _slow(text)


def _coco_captions() -> list[str]:
    coco = json.loads((DATA / "coco2014" / "captions_val2014_subset.json").read_text(encoding="utf-8"))
    return [a["caption"].strip() for a in coco["annotations"]]


def _long_captions(n: int, target_tokens: int = 170) -> list[str]:
    """ShareGPT4V-length captions joined from COCO captions, as ``benchmarks/bench_audit.py`` makes them."""
    caps = _coco_captions()
    lens = [len(c.split()) + 1 for c in caps]
    m, out = len(caps), []
    for i in range(n):
        j, parts, tok = (i * 7919) % m, [], 0
        while tok < target_tokens:
            parts.append(caps[j] if caps[j].endswith(".") else caps[j] + ".")
            tok += lens[j]
            j = (j + 1) % m
        out.append(" ".join(parts))
    return out


@needs_shared
def test_long_joined_captions_equal_nltk():
    """Benchmark-style long captions: every one off the fast path (quotes, '?', '3.5', ...) goes
    segment by segment and must equal NLTK on the whole caption; a sample of the rest too."""
    caps = _long_captions(4000)
    slow = [c for c in caps if fast_tokenize_caption(c.lower()) is None]
    assert len(slow) > 100  # ~150 of 4,000 miss the fast path
    n_seg = 0
    for cap in slow:
        text = cap.lower()
        seg = _segmented_caption(cap.lower())
        if seg is not None:
            n_seg += 1
        assert tokenize_caption(cap) == _slow(text), cap
    assert n_seg / len(slow) > 0.95  # the segment-wise path is what long captions take
    for cap in caps[:600]:
        assert tokenize_caption(cap) == _slow(cap.lower()), cap


@needs_shared
@pytest.mark.parametrize("seed", [0, 1])
def test_segmented_path_equals_nltk_on_random_joins(seed):
    """Random joins of shared captions (the unusual ones over-represented) with varied
    separators and endings: wherever a safe boundary exists, segments == whole caption."""
    rng = random.Random(seed)
    caps = _coco_captions() + _all_shared_captions()[:20000]
    odd = [c for c in caps if fast_tokenize_caption(c.lower()) is None]
    seps = [" ", "  ", "\n", " \t", ". ", ".  ", "! ", "? ", ", ", "\" ", " '", ") "]
    checked = 0
    for _ in range(600):
        parts = [rng.choice(odd if rng.random() < 0.5 else caps) for _ in range(rng.randint(2, 7))]
        text = parts[0]
        for p in parts[1:]:
            text += rng.choice(seps) + p
        if rng.random() < 0.3:
            text += rng.choice([".", " .", "?", ".\"", ""])
        seg = _segmented_caption(text.lower())
        if seg is not None:
            checked += 1
            assert seg == _slow(text.lower()), repr(text)
    assert checked > 200


@pytest.mark.parametrize("seed", [3, 4])
def test_segmented_path_equals_nltk_on_random_text(seed):
    rng = random.Random(seed)
    pieces = ("a man dog's dogs table. it 's , . < > <unk> - x-ray 3 10 a. the bus ties st. "
              "mr. gonna wanna 's, '' s 'st cannot don't can't n't they're i'm he'd you'll 'll o'neil "
              "10:30 a: b; c& $5 50% #1 @home (a) [b] {c} ) ( ] a/b :: ,: x). y) a.) 'n't "
              "rock'n'roll woman's man's. n's \" `` ? ! ... -- 3.5 u.s. what? “q” ‘a’ dog.\" "
              "sign.' wanna. ok.").split(" ")
    pieces += [" ", "  ", "\t", "\n", ". ", "word. ", "dogs.  ", "it. 3 ", "sign.\n"]
    checked = 0
    for _ in range(3000):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 24)))
        if rng.random() < 0.3:
            text = text.replace(" .", ".")
        seg = _segmented_caption(text.lower())
        if seg is not None:
            checked += 1
            assert seg == _slow(text.lower()), repr(text)
    assert checked > 500


@needs_shared
@pytest.mark.slow
def test_fast_path_equals_nltk_on_long_captions():
    """The fast path cuts a whole multi-sentence caption at its periods in one pass: equal to
    NLTK (sentences and line tokens) on every benchmark-style long caption it accepts."""
    caps = [c.lower() for c in _long_captions(1500)]
    fast = [(c, fast_tokenize_caption(c)) for c in caps]
    taken = [(c, r) for c, r in fast if r is not None]
    assert len(taken) > 1200
    for text, r in taken:
        assert r == _slow(text), text
