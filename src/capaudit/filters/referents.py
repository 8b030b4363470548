"""Kept sentences whose referent was dropped: flag them for review, never drop them.

Why: on LLaVA's detailed descriptions filtered with instances evidence, "Additionally,
there are two potted plants ..." is dropped and the next sentence, "The presence of these
elements gives the room a warm, inviting atmosphere.", survives and now points at nothing.
Whether it still reads well is a human's call, so it is kept and marked ``flag`` with a
``review:`` reason (the filter log, the summary's reasons and ``review export`` show it).

Kept simple and precise: only a sentence that *opens* with a referring word ("This",
"These", "Those", "That", "It", "They", "Their", "Its", or "The presence of these",
"Both of them", ...) and whose *immediately preceding* sentence was dropped is flagged.
"It is a sunny day." after a kept sentence is never flagged, nor are the dummy "it" of
"It seems", "It appears", "It looks like" and "It is likely/possible/clear".
"""

from __future__ import annotations

import re

from capaudit.filters.base import CaptionResult, Decision

__all__ = ["referring_opener", "flag_orphans"]

_REFERRING = r"(?:this|these|those|that|it|its|they|their|them|he|she|his|her)"
# "The presence of these", "All of them", "Each of those": up to three words, then "of"
_OPENER = re.compile(rf"^\W*(?:(?:the\s+)?\w+(?:\s+\w+)?\s+of\s+)?({_REFERRING})\b",
                     re.IGNORECASE)
_DUMMY_IT = re.compile(r"^\W*it\s+(?:seems|appears|looks\s+like|is\s+(?:likely|possible|"
                       r"clear|evident|unclear|worth|important|probable))\b", re.IGNORECASE)


def referring_opener(sentence: str) -> str | None:
    """The opening words of ``sentence`` that refer back ("These", "The presence of these"),
    or None."""
    if _DUMMY_IT.match(sentence):
        return None
    m = _OPENER.match(sentence)
    return m.group(0).strip() if m else None


def flag_orphans(result: CaptionResult, sentences: list[str]) -> tuple[CaptionResult, int]:
    """``result`` with each kept sentence that refers back to a dropped one marked ``flag``
    (reason ``review: ...``, after any reason it had); returns it and how many were flagged."""
    decisions = list(result.decisions)
    by_idx = {d.sentence_idx: i for i, d in enumerate(decisions)}
    flagged = 0
    for i, d in enumerate(decisions):
        prev = by_idx.get(d.sentence_idx - 1)
        if d.action not in ("keep", "flag") or prev is None or \
                decisions[prev].action != "drop":
            continue
        opener = referring_opener(sentences[d.sentence_idx])
        if opener is None:
            continue
        why = (f"review: opens with '{opener}' right after dropped sentence "
               f"{d.sentence_idx - 1} (its referent may be gone)")
        reason = why if d.action == "keep" else f"{d.reason}; {why}"
        decisions[i] = Decision(d.sentence_idx, "flag", reason, d.revised, d.critique, d.score)
        flagged += 1
    if not flagged:
        return result, 0
    return CaptionResult(result.doc, decisions, result.meta), flagged
