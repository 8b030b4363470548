"""Strict parsers of judge answers; each carries the ``reminder`` sent on the one retry.

Why strict: a lenient parser turns a rambling answer into a silent "yes" or
"no" and the metric moves for no reason. An answer that does not match the
requested format raises :class:`~capaudit.judge.core.ParseError`; the judge
layer then asks once more with the reminder and otherwise records
``unparsed``. Tolerated: surrounding whitespace, Markdown bold and a code
fence around JSON -- nothing that changes the meaning.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

from capaudit.judge.config import ParseError, Verdict

__all__ = ["yes_no_critique", "json_answer", "unit_list", "label_answer", "score01", "matches",
           "p_yes_from_logprobs", "verdict_of"]

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def _with_reminder(reminder: str):
    def deco(fn):
        fn.reminder = reminder
        return fn
    return deco


@_with_reminder("Answer exactly: first line 'yes' or 'no'; second line: the error or nothing.")
def yes_no_critique(text: str) -> tuple[bool, str]:
    """``yes``/``no`` alone on the first line, then an optional ``Critique:`` line.

    Also read: one JSON object with a boolean ``factual`` (or ``supported``) and
    a ``critique`` string -- unambiguous, and what older judge prompts asked for.
    """
    if (text or "").strip().startswith(("{", "```")):
        data = json_answer(text)
        key = next((k for k in ("factual", "supported") if isinstance(data, dict)
                    and isinstance(data.get(k), bool)), None)
        if key is None:
            raise ParseError("JSON answer without a true/false 'factual'")
        return data[key], str(data.get("critique") or "").strip()
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    if not lines:
        raise ParseError("empty answer")
    head = lines[0].strip("*_ ").rstrip(".").strip().lower()
    if head not in ("yes", "no"):
        raise ParseError(f"first line must be yes or no, got {lines[0][:40]!r}")
    rest = " ".join(lines[1:])
    rest = re.sub(r"^\**critique\**\s*:\s*", "", rest, flags=re.I).strip()
    return head == "yes", rest


def json_answer(text: str) -> Any:
    """The one JSON value of the answer (a code fence around it is allowed)."""
    t = (text or "").strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1)
    try:
        return json.loads(t)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:
        raise ParseError("JSON nested too deeply") from None


def _need(obj: dict, key: str, kinds, where: str):
    if not isinstance(obj, dict) or key not in obj or not isinstance(obj[key], kinds):
        raise ParseError(f"{where}: missing or wrong '{key}'")
    return obj[key]


UNIT_TYPES = ("object", "attribute", "count", "relation", "text", "action", "scene", "other")


@_with_reminder('Answer with JSON only: {"units": [{"text": "...", "type": "object|attribute|'
                'count|relation|text|action|scene|other", "relevant": true}]}.')
def unit_list(text: str) -> list[dict]:
    """DCScore decomposition / FaithScore atomic facts: a list of typed units."""
    data = json_answer(text)
    units = _need(data, "units", list, "answer")
    out = []
    for k, u in enumerate(units):
        t = _need(u, "text", str, f"unit {k}").strip()
        typ = str(u.get("type", "other")).lower()
        if typ not in UNIT_TYPES:
            raise ParseError(f"unit {k}: unknown type {typ!r}")
        rel = u.get("relevant", True)
        if not isinstance(rel, bool):
            raise ParseError(f"unit {k}: 'relevant' must be true or false")
        out.append({"text": t, "type": typ, "relevant": rel,
                    "sentence": int(u["sentence"]) if isinstance(u.get("sentence"), int) else None})
    return out


def label_answer(labels: tuple[str, ...]) -> Callable[[str], str]:
    """One of ``labels`` as the whole answer (case-insensitive), e.g. COR/INC/MISS."""
    @_with_reminder(f"Answer with exactly one word: {' or '.join(labels)}.")
    def parse(text: str) -> str:
        word = (text or "").strip().strip("*_ .").upper()
        if word not in labels:
            raise ParseError(f"expected one of {labels}, got {(text or '')[:40]!r}")
        return word
    return parse


@_with_reminder('Answer with JSON only: {"semantic": 0.0-1.0, "overall": 0.0-1.0}.')
def score01(text: str) -> dict:
    """CapScore: two numbers in [0, 1]."""
    data = json_answer(text)
    out = {}
    for key in ("semantic", "overall"):
        v = _need(data, key, (int, float), "answer")
        if isinstance(v, bool) or not 0.0 <= float(v) <= 1.0:
            raise ParseError(f"'{key}' must be a number in [0, 1]")
        out[key] = float(v)
    return out


def matches(n_a: int, n_b: int) -> Callable[[str], list[tuple[int, int]]]:
    """DCScore matching: pairs (unit of list A, unit of list B), numbers in range."""
    @_with_reminder('Answer with JSON only: {"matches": [[a, b], ...]} using the unit numbers '
                    f'(A: 0-{n_a - 1}, B: 0-{n_b - 1}).')
    def parse(text: str) -> list[tuple[int, int]]:
        data = json_answer(text)
        pairs = _need(data, "matches", list, "answer")
        out = []
        for p in pairs:
            if not (isinstance(p, list) and len(p) == 2
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in p)):
                raise ParseError(f"match {p!r} is not a pair of unit numbers")
            if not (0 <= p[0] < n_a and 0 <= p[1] < n_b):
                raise ParseError(f"match {p!r} names a unit that does not exist")
            out.append((p[0], p[1]))
        return sorted(set(out))
    return parse


_YES = {"yes", "true"}
_NO = {"no", "false"}


def p_yes_from_logprobs(logprobs: list | None) -> float | None:
    """P(yes) / (P(yes) + P(no)) at the first word token of the answer, if the server sent it."""
    for tok in logprobs or []:
        word = str(tok.get("token", "")).strip().strip("*\"'{").lower()
        if not word.isalpha():
            continue
        cands = tok.get("top_logprobs") or [tok]
        y = sum(math.exp(c["logprob"]) for c in cands
                if str(c.get("token", "")).strip().strip("*\"'").lower() in _YES)
        n = sum(math.exp(c["logprob"]) for c in cands
                if str(c.get("token", "")).strip().strip("*\"'").lower() in _NO)
        return y / (y + n) if y + n > 0 else None
    return None


def verdict_of(task, res) -> Verdict:
    """The verdict of one backend result: ``not-judged`` when the request cap refused it,
    ``failed`` without an answer, ``unparsed`` when the task's parser rejects it."""
    from capaudit.llm.base import CAPPED

    if res.error is not None and CAPPED in res.error:
        return Verdict("not-judged", error=res.error, cached=res.cached)
    if res.error is not None or res.text is None:
        return Verdict("failed", error=res.error or "empty answer", cached=res.cached)
    try:
        value = task.parse(res.text)
    except ParseError as exc:
        return Verdict("unparsed", text=res.text, error=str(exc), cached=res.cached)
    except (RecursionError, ValueError, TypeError, KeyError, IndexError) as exc:
        # each answer in its own guard: one hostile reply (100,000 nested brackets)
        # is that task's "unparsed", never the end of the run
        return Verdict("unparsed", text=res.text, error=f"unreadable answer "
                       f"({exc.__class__.__name__})", cached=res.cached)
    return Verdict("ok", value, res.text, p_yes_from_logprobs(res.logprobs), res.cached)
