"""A plain reference of the hallucination filter's decisions, for identity tests.

The filter scores captions in batches, parses the sentences that need it with
``nlp.pipe``, caches notes by sentence and computes sentence spans without Punkt
(:mod:`capaudit.filters.hallucination`, :mod:`capaudit.filters.mention_scan`,
:mod:`capaudit.text.sentences`). This module computes the same decisions the slow, obvious
way the filter did before those changes: Punkt's own ``span_tokenize`` for the spans, the
audit's :func:`~capaudit.text.records.analyse_caption` for the mentions, negation scope per
sentence, and one spaCy call per sentence (``nlp(Doc(words))``), with the judging and
deciding rules written out in full. It shares only the rule primitives (negation cues, the
non-visual clause rules, the modifier rule, referring openers), which the changes did not
touch. ``parse_one`` memoises its one-sentence parses per token list, and
``reference_result`` a caption's spans, sentence tokens and mentions per caption (pure
functions of the text), so the tests can compare many option combinations in bounded time:
the options change only the rules applied to them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from capaudit.filters.base import CaptionDoc, CaptionResult, Decision
from capaudit.filters.negation import negated_positions
from capaudit.filters.nonvisual import may_be_non_visual, non_visual_reason
from capaudit.filters.parse import _may_modify, mention_span, modifier_heads
from capaudit.filters.referents import flag_orphans
from capaudit.text.objects import get_lexicon
from capaudit.text.records import analyse_caption
from capaudit.text.tokenize import tokenize_caption

_PARSES: dict[tuple[str, ...], object] = {}


def punkt_reference(caption: str) -> list[tuple[int, int]]:
    """Sentence spans as computed before: untrained Punkt's ``span_tokenize`` on the
    lowercased caption, each span stripped of whitespace."""
    text = caption.lower()
    if len(text) != len(caption):
        text = caption
    out = []
    for a, b in _punkt().span_tokenize(text):
        while a < b and caption[a].isspace():
            a += 1
        while b > a and caption[b - 1].isspace():
            b -= 1
        out.append((a, b))
    return out


@lru_cache(maxsize=None)
def _punkt():
    """One untrained Punkt: it keeps no state between texts, and building one compiles (and
    ReDoS-checks) its patterns again, a third of the reference's time when built per caption."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer()


@lru_cache(maxsize=None)
def _caption_spans(caption: str) -> tuple[tuple[int, int], ...]:
    return tuple(punkt_reference(caption) or [(0, len(caption))])


def punkt_spans(caption: str) -> list[tuple[int, int]]:
    """A caption's sentences as ``CaptionDoc.spans`` had them (no sentence: one empty one)."""
    return list(_caption_spans(caption))


@lru_cache(maxsize=None)
def _tokens_and_mentions(caption: str, mode: str) -> tuple[list, list]:
    """The tokenizer's sentence tokens and the audit's mentions of one caption (not changed by
    the caller: read only)."""
    return tokenize_caption(caption)[0], analyse_caption(caption, mode).mentions


def parse_one(tokens: list[str]):
    """One sentence through spaCy alone: ``nlp(Doc(words))``, as the filter used to call it."""
    key = tuple(tokens)
    if key not in _PARSES:
        from spacy.tokens import Doc

        from capaudit.filters.parse import _nlp

        nlp = _nlp()
        words = [t if t and not t.isspace() else "_" for t in tokens]
        _PARSES[key] = nlp(Doc(nlp.vocab, words=words))
    return _PARSES[key]


def sentence_notes(tokens: list[str], starts: list[int], mode: str, modifiers: bool,
                   non_visual: bool) -> list:
    """``None`` / ``("modifier", head words)`` / ``("non-visual", why)`` per mention."""
    if not (modifiers or non_visual):
        return [None] * len(starts)
    spans = [mention_span(tokens, i, mode) for i in starts]
    modifiers = modifiers and any(_may_modify(tokens, b, a) for _, b in spans for a, _ in spans)
    non_visual = non_visual and may_be_non_visual(tokens)
    if not (modifiers or non_visual):
        return [None] * len(starts)
    doc = parse_one(tokens)
    heads = modifier_heads(doc, spans) if modifiers else {}
    out = []
    for m, (_a, b) in enumerate(spans):
        if m in heads:
            a2, b2 = spans[heads[m]]
            out.append(("modifier", " ".join(tokens[a2:b2 + 1])))
        elif non_visual and (why := non_visual_reason(doc, b)):
            out.append(("non-visual", why))
        else:
            out.append(None)
    return out


@dataclass
class Facts:
    """What the filter finds in one sentence."""

    score: float | None = 1.0
    unsupported: list = field(default_factory=list)
    supported: list = field(default_factory=list)
    negated: list = field(default_factory=list)
    non_visual: list = field(default_factory=list)
    modifier: list = field(default_factory=list)


def caption_facts(caption: str, n_spans: int, support: dict, opts: dict
                  ) -> tuple[list[Facts], bool]:
    """Per-sentence facts of one covered caption, and whether it was judged whole."""
    mode, thr = opts["object_mode"], opts["threshold"]
    modifiers, skip_nv = mode == "corrected", opts["non_visual"] != "judge"
    sents, mentions = _tokens_and_mentions(caption, mode)
    lex = get_lexicon(mode)
    starts = [sum(len(s) for s in sents[:i]) for i in range(len(sents))]
    by_sent: dict[int, list] = {}
    for w, c, t, s in mentions:
        by_sent.setdefault(s, []).append((lex.words[w], lex.categories[c], t - starts[s]))
    aligned = len(sents) == n_spans
    facts = [Facts() for _ in range(n_spans)]
    for si, ments in by_sent.items():
        target = facts[si if aligned else 0]
        neg = negated_positions(sents[si]) if opts["negation"] else set()
        sups = [support.get(cat, 0.0) for _, cat, _ in ments]
        if any(sup < thr and tok not in neg for sup, (_, _, tok) in zip(sups, ments)):
            notes = sentence_notes(sents[si], [tok for _, _, tok in ments], mode, modifiers,
                                   skip_nv)
        else:
            notes = [None] * len(ments)
        for (word, cat, tok), sup, note in zip(ments, sups, notes):
            if tok in neg:
                target.negated.append(word)
                continue
            named = f"{word}->{cat}"
            if note is not None and sup < thr:
                if note[0] == "modifier":
                    target.modifier.append(f"{named} (modifies {note[1]})")
                    continue
                target.non_visual.append(f"{named} ({note[1]})")
                if skip_nv:
                    continue
            target.score = min(target.score, sup)
            (target.unsupported if sup < thr else target.supported).append(named)
    return facts, not aligned


def _notes(f: Facts, keys) -> list[str]:
    return [f"{k.replace('_', '-')}: " + ", ".join(getattr(f, k)) for k in keys if getattr(f, k)]


def reference_result(doc: CaptionDoc, support: dict | None, opts: dict, counts: Counter
                     ) -> CaptionResult:
    """The filter's decisions for one caption, computed the plain way; ``counts`` gathers
    the report's counters (non-visual / modifier mentions and sentences, review flags)."""
    spans = punkt_spans(doc.caption)
    if support is None:
        act = "drop" if opts["missing"] == "drop" else "keep"
        return CaptionResult(doc, [Decision(i, act, "no-evidence") for i in range(len(spans))])
    facts, whole = caption_facts(doc.caption, len(spans), support, opts)
    bad = [f for f in facts if f.unsupported]
    decisions = []
    for i, f in enumerate(facts):
        counts["non_visual_mentions"] += len(f.non_visual)
        counts["modifier_mentions"] += len(f.modifier)
        notes = _notes(f, ("non_visual", "modifier", "negated"))
        if f.unsupported:
            reason = "; ".join(["unsupported: " + ", ".join(f.unsupported)] + notes)
        elif bad and (opts["action"] == "drop-caption" or whole):
            reason = "caption-has-unsupported: " + ", ".join(u for b in bad for u in b.unsupported)
        else:
            counts["non_visual_sentences"] += bool(f.non_visual)
            counts["modifier_sentences"] += bool(f.modifier)
            reason = "; ".join(notes + _notes(f, ("supported",))) or "no object mention"
            act = "flag" if f.non_visual and opts["non_visual"] == "flag" else "keep"
            decisions.append(Decision(i, act, reason, score=f.score))
            continue
        decisions.append(Decision(i, "flag" if opts["action"] == "flag" else "drop", reason,
                                  score=f.score))
    sentences = [doc.caption[a:b] for a, b in spans]
    result, orphans = flag_orphans(CaptionResult(doc, decisions), sentences)
    counts["review_sentences"] += orphans
    return result
