"""Filter protocol: score, then decide, and log what was removed or changed and why.

Modelled on datatrove's ``BaseFilter`` (a filter returns ``(False, reason)``
and an exclusion writer keeps what was dropped) and NeMo Curator's split of
*scoring* from *keeping*:

1. :meth:`Filter.setup` loads what the filter needs once (evidence files,
   demographics, a judge client);
2. :meth:`Filter.score` looks at one caption and returns one
   :class:`SentenceScore` per sentence: a number plus the facts behind it
   (which mentions are unsupported, which gendered words were found ...).
   Scoring never changes text;
3. :meth:`Filter.decide` turns the scores into one :class:`Decision` per
   sentence: ``keep``, ``flag`` (kept, marked for review), ``revise`` (kept,
   text replaced) or ``drop``, each with a reason.

Filters that must see the whole set before deciding (``gender-balance``
resamples images) override :meth:`Filter.apply` instead; they still emit one
:class:`Decision` per sentence, so every filter's log satisfies the same
invariant, checked by :meth:`FilterSummary.check`::

    sentences in = kept + dropped,   kept = keep + flag + revise

A caption all of whose sentences are dropped leaves the output set. The
runner (:mod:`capaudit.filters.runner`) writes the new set, the sentence-level
log (``filter_log``) and a summary (``filter_runs``) in one transaction.

Filters are registered by name in :data:`FILTERS` as lazy ``"module:attr"``
entries, so ``capaudit filter run --filter NAME`` imports only what it uses.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping

from capaudit.core.registry import Registry
from capaudit.text.mentions import CaptionDoc  # re-exported: the filters' record of a caption

__all__ = ["FILTERS", "Filter", "CaptionDoc", "SentenceScore", "Decision", "CaptionResult",
           "FilterSummary", "FilterContext", "ACTIONS", "KEPT_ACTIONS", "join_sentences"]

ACTIONS = ("keep", "flag", "revise", "drop")
KEPT_ACTIONS = frozenset({"keep", "flag", "revise"})

FILTERS: Registry = Registry("filter", group="filters")  # base (Filter) set below
FILTERS.register("hallucination", "capaudit.filters.hallucination:HallucinationFilter",
                 version="2", description="drop sentences mentioning objects the evidence lacks")
FILTERS.register("gender-neutral", "capaudit.filters.gender:GenderNeutralFilter", version="1",
                 description="replace gendered words where the image label is unknown/contradicted")
FILTERS.register("gender-balance", "capaudit.filters.gender_balance:GenderBalanceFilter", version="1",
                 description="undersample so woman and man images are balanced (overall/per object)")
FILTERS.register("critique-revise", "capaudit.filters.critique:CritiqueReviseFilter", version="1",
                 description="a judge labels sentences; flagged ones are critiqued and rewritten")


# -- sentences (spans: capaudit.text.mentions.sentence_spans) ------------------
def join_sentences(caption: str, spans: list[tuple[int, int]], texts: list[str | None]) -> str:
    """Rebuild a caption from its sentences; ``None`` drops one, a string replaces it.

    When nothing changed the caption is returned verbatim (leading spaces and
    all), so a filter that keeps a caption never alters its bytes. Otherwise kept
    sentences are joined by the source's own separators, so a revised answer keeps its
    paragraphs for training: two neighbours keep the text between them; where sentences
    between them went, the strongest of the skipped separators stays (the first with the
    most line breaks), so dropping a paragraph's last sentence keeps the break after it.
    The caption's leading (trailing) text stays with its first (last) sentence.
    """
    if all(t is not None and t == caption[a:b] for t, (a, b) in zip(texts, spans)):
        return caption
    kept = [(i, t.strip()) for i, t in enumerate(texts) if t is not None and t.strip()]
    if not kept:
        return ""
    parts = [caption[:spans[0][0]] if kept[0][0] == 0 else ""]
    for n, (i, text) in enumerate(kept):
        if n:
            prev = kept[n - 1][0]
            gaps = [caption[spans[k][1]:spans[k + 1][0]] for k in range(prev, i)]
            parts.append(max(gaps, key=lambda gap: gap.count("\n")))
        parts.append(text)
    if kept[-1][0] == len(spans) - 1:
        parts.append(caption[spans[-1][1]:])
    return "".join(parts)


# -- records --------------------------------------------------------------------
@dataclass
class SentenceScore:
    """What a filter measured on one sentence (never changes the text)."""

    sentence_idx: int
    score: float | None = None
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Decision:
    """What happens to one sentence, and why."""

    sentence_idx: int
    action: str = "keep"              # keep | flag | revise | drop
    reason: str = ""
    revised: str | None = None        # new text when action == "revise"
    critique: str | None = None
    score: float | None = None

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}")


@dataclass
class CaptionResult:
    """The decisions for one caption and the caption that results."""

    doc: CaptionDoc
    decisions: list[Decision]
    meta: dict = field(default_factory=dict)   # extra per-caption meta for the output row

    @property
    def kept(self) -> bool:
        return any(d.action in KEPT_ACTIONS for d in self.decisions)

    def text(self) -> str:
        texts: list[str | None] = []
        for d, s in zip(self.decisions, self.doc.sentences):
            if d.action == "drop":
                texts.append(None)
            elif d.action == "revise" and d.revised is not None:
                texts.append(d.revised)
            else:
                texts.append(s)
        return join_sentences(self.doc.caption, self.doc.spans, texts)


@dataclass
class FilterSummary:
    """Counts of one filter run; the sentence-level invariant is checked here."""

    filter: str
    captions_in: int = 0
    captions_out: int = 0
    sentences_in: int = 0
    actions: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    extra: dict = field(default_factory=dict)   # filter-specific report (e.g. co-occurrence)

    @property
    def kept(self) -> int:
        return sum(self.actions[a] for a in KEPT_ACTIONS)

    @property
    def dropped(self) -> int:
        return self.actions["drop"]

    def add(self, result: CaptionResult) -> None:
        self.captions_in += 1
        self.captions_out += int(result.kept)
        self.sentences_in += len(result.doc.spans)
        for d in result.decisions:
            self.actions[d.action] += 1
            if d.action != "keep" and d.reason:
                self.reasons[d.reason.split(":")[0]] += 1

    def check(self) -> None:
        """Raise if the log does not add up (a bug, never the user's fault)."""
        if self.sentences_in != self.kept + self.dropped:
            raise AssertionError(f"filter log does not add up: {self.sentences_in} sentences in, "
                                 f"{self.kept} kept + {self.dropped} dropped")

    def as_dict(self) -> dict:
        return {"filter": self.filter, "captions_in": self.captions_in,
                "captions_out": self.captions_out, "sentences_in": self.sentences_in,
                "sentences_kept": self.kept, "sentences_dropped": self.dropped,
                "actions": {a: self.actions[a] for a in ACTIONS},
                "reasons": dict(self.reasons.most_common()), **self.extra}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), default=str)


# -- the protocol ---------------------------------------------------------------
class Filter:
    """Base class: subclasses implement :meth:`score` and :meth:`decide` (or :meth:`apply`)."""

    name: str = "filter"
    version: str = "1"
    #: options the filter understands, with defaults (CLI and YAML resolve over these)
    defaults: Mapping[str, Any] = {}
    #: set-level facts the runner stores in the summary once the stream has ended (a filter
    #: sets its own dict, or, where they cost work to count, defines a property)
    report: Mapping[str, Any] = MappingProxyType({})
    #: ``{option: why}`` for options a rule chose from other options (e.g. the object mode
    #: references bring: :data:`capaudit.filters.declared.CHOSEN`); saved in its config
    #: and summary
    chosen: Mapping[str, str] = MappingProxyType({})

    def __init__(self, **options):
        unknown = set(options) - set(self.defaults)
        if unknown:
            from capaudit.errors import InputError
            raise InputError(f"filter '{self.name}' does not take option(s) "
                             f"{', '.join(sorted(unknown))}",
                             fix=f"its options are: {', '.join(sorted(self.defaults)) or 'none'}")
        self.options = {**self.defaults, **options}

    # lifecycle
    def setup(self, context: "FilterContext | None" = None) -> None:
        """Load evidence / clients once, before the first caption."""

    def score(self, doc: CaptionDoc) -> list[SentenceScore]:  # pragma: no cover - abstract
        raise NotImplementedError

    def decide(self, doc: CaptionDoc, scores: list[SentenceScore]) -> CaptionResult:
        raise NotImplementedError  # pragma: no cover - abstract

    def apply(self, docs: Iterable[CaptionDoc]) -> Iterator[CaptionResult]:
        """Stream in, stream out: score each caption, then decide."""
        for doc in docs:
            yield self.decide(doc, self.score(doc))

    def config(self) -> dict:
        cfg = {"filter": self.name, "version": self.version, **self.options}
        if self.chosen:
            cfg["chosen"] = dict(self.chosen)
        return cfg


FILTERS.base = Filter


@dataclass
class FilterContext:
    """What the runner hands a filter at setup: the store and the input set's name.
    ``guarded``: the engine has held the evidence's coverage of the input already (a
    sharded corpus, counted shard by shard before any output), so setup does not."""

    store: Any = None
    set_name: str | None = None
    guarded: bool = False
