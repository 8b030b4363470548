"""A ``chat(messages) -> str`` callable seen as a backend, so the judge layer can use it.

Why: the critique-revise filter (and tests) may hand in a chat function instead
of backend settings; wrapping it keeps one scoring path (the judge layer's
render, strict parse and format retry) for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from capaudit.llm.base import Backend, GenRequest, GenResult


@dataclass
class ChatFnBackend(Backend):
    chat: Callable | None = None

    name = "chat"

    def __post_init__(self):
        super().__post_init__()
        self.accepts_images = getattr(self.chat, "accepts_images", True)

    def _generate_uncached(self, requests: list[GenRequest]) -> list[GenResult]:
        out = []
        for req in requests:
            self.stats.requests += 1
            try:
                out.append(GenResult(self.chat(req.messages())))
            except Exception as exc:  # the callable's failure is this request's failure
                out.append(GenResult(None, error=f"{exc.__class__.__name__}: {exc}"))
        return out
