"""What the judge layer works with: its settings, a question, an answer, the counters.

Kept apart from :mod:`capaudit.judge.core` (the loop) so metric modules and the
CLI import plain data without the machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from capaudit.errors import InputError, UsageError

__all__ = ["STATUSES", "ParseError", "JudgeConfig", "Task", "Verdict", "JudgeStats", "priced",
           "Unanswered"]

STATUSES = ("ok", "unparsed", "failed", "not-judged", "dry-run")


class Unanswered(InputError):
    """A judge none of whose units were answered so far (:meth:`Judge._send`): a set's
    chunk (several workers) reports it, the set is fatal only if no chunk was answered."""


class ParseError(ValueError):
    """The answer does not have the required format."""


# setting: (lowest, highest, whole number, may be None); all must be finite
_RANGES = (("concurrency", 1, 1024, True, False), ("timeout_s", 0.001, 1e6, False, False),
           ("deadline_s", 0.001, 1e6, False, True), ("max_retries", 0, 100, True, False),
           ("max_calls", 0, None, True, True), ("max_cost", 0, None, False, True),
           ("chars_per_token", 0.1, 1000, False, False), ("image_tokens", 0, 1e6, True, False))
_FLAGS = {"max_calls": "--max-calls", "max_cost": "--max-cost"}


def _short(value) -> str:
    import reprlib

    return reprlib.repr(value)


@dataclass
class JudgeConfig:
    backend: str = "openai"
    model: str = ""
    url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    params: dict = field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 256})
    logprobs: bool = True            # ask OpenAI-compatible servers for top log-probabilities
    concurrency: int = 8
    timeout_s: float = 120.0         # the longest silence while a reply is read
    deadline_s: float | None = None  # a whole request (default 3 x timeout_s): a server that
    #                                  drips its answer a byte at a time cannot hold the run
    max_retries: int = 3
    cache: str | None = "default"    # the user cache dir's judge.sqlite; a path; "off" (None): off
    dry_run: bool = False
    max_calls: int | None = None
    max_cost: float | None = None
    prices: dict = field(default_factory=dict)   # model -> {input: $/Mtok, output: $/Mtok}
    chars_per_token: float = 4.0     # dry-run token estimate
    image_tokens: int = 765          # dry-run estimate per image (a 512px tile on GPT-4o class)
    evidence: str = "image"          # image | reference-captions
    prompts: dict = field(default_factory=dict)  # template name -> path override

    def __post_init__(self):
        """Every setting checked once, whatever set it (YAML, CLI, API): a list or number
        under ``params:``, ``chars_per_token: 0`` or a malformed ``url`` reached the code
        as a TypeError, a ZeroDivisionError or a ValueError traceback."""
        from capaudit.core.ranges import check_number

        for key, lo, hi, integer, optional in _RANGES:
            check_number(key, getattr(self, key), lo, hi, integer=integer, optional=optional,
                         flag=_FLAGS.get(key, key))
        for key in ("params", "prices", "prompts"):
            if not isinstance(getattr(self, key), dict):
                raise UsageError(f"judge {key} must be a mapping of name: value, not "
                                 f"{type(getattr(self, key)).__name__} "
                                 f"{_short(getattr(self, key))}",
                                 fix=f"write {key}: followed by indented name: value lines")
        for model, price in self.prices.items():
            if not isinstance(price, dict):
                raise UsageError(f"judge prices of {model!r} must be a mapping "
                                 "{input: $/Mtok, output: $/Mtok}", fix="e.g. prices: "
                                 "{gpt-4o: {input: 2.5, output: 10}}")
            for side in ("input", "output"):
                check_number(f"judge prices {model} {side}", price.get(side, 0), 0, None,
                             integer=False)
        if self.cache is False or (isinstance(self.cache, str) and self.cache.lower() == "off"):
            self.cache = None   # YAML's null means "the default" there, so "off" says off
        if self.cache is not None and not isinstance(self.cache, str):
            raise UsageError(f"judge cache must be default, off or a file path, not "
                             f"{_short(self.cache)}", fix="cache: off")
        for key in ("logprobs", "dry_run"):
            if not isinstance(getattr(self, key), bool):
                raise UsageError(f"judge {key} must be true or false, not "
                                 f"{_short(getattr(self, key))}", fix=f"{key}: true")
        if self.backend == "openai":
            from capaudit.llm.openai import check_base_url

            check_base_url(self.url, "--judge-url")

    def cache_path(self) -> str | None:
        """The response cache file: ``cache`` as given, or for ``"default"`` capaudit's user
        cache dir (:func:`capaudit.core.config.user_cache_dir`), never the working
        directory (where ``.capaudit_cache/`` used to appear wherever a judge ran)."""
        if self.cache != "default":
            return self.cache
        from capaudit.core.config import user_cache_dir

        return str(user_cache_dir() / "judge.sqlite")

    @classmethod
    def from_mapping(cls, cfg: dict) -> "JudgeConfig":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise InputError(f"unknown judge setting(s): {', '.join(unknown)}",
                             fix=f"use only: {', '.join(sorted(known))}")
        return cls(**cfg)


@dataclass
class Task:
    """One question to the judge: a template name, its fields, a strict parser."""

    prompt: str
    fields: dict
    parse: Callable[[str], Any]
    image: tuple[bytes, str] | None = None   # (bytes, mime)
    expect_out: int = 60                     # dry-run estimate of answer tokens


@dataclass
class Verdict:
    status: str                     # one of STATUSES
    value: Any = None
    text: str | None = None
    p_yes: float | None = None
    cached: bool = False
    error: str | None = None


@dataclass
class JudgeStats:
    calls: int = 0               # requests that reached the model (HTTP attempts included)
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    format_retries: int = 0
    ok: int = 0
    unparsed: int = 0
    failed: int = 0
    not_judged: int = 0
    seconds: float = 0.0
    cost: float | None = 0.0
    est_calls: int = 0           # dry run
    est_cached: int = 0          # dry run: units the response cache already holds (free)
    est_tokens_in: int = 0
    est_tokens_out: int = 0
    est_cost: float | None = 0.0
    stopped: str | None = None   # why sending stopped early (max-calls / max-cost)
    usage_ignored: int = 0       # replies whose server token counts were impossible
    spent: float = 0.0           # what --max-cost counts: the server's reported usage, priced;
    #                              a reply's estimate where it reported none or impossible figures


def priced(price: dict | None, tokens_in: float, tokens_out: float) -> float | None:
    """What tokens cost at a model's ``{input, output}`` $/Mtok (None: no price known)."""
    if price is None:
        return None
    return tokens_in / 1e6 * float(price.get("input", 0)) + \
        tokens_out / 1e6 * float(price.get("output", 0))
