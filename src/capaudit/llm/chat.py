"""Chat-style access to any LLM backend: ``chat(messages) -> str``.

Why: filters that hold a conversation with a judge (``critique-revise``, later
LLM-judged audits) speak OpenAI chat messages, while every model call in the
project goes through one registry of backends (:mod:`capaudit.llm.base`)
with its retries, backoff, cache and statistics. This adapter is the only
bridge, so a judge can be a server (``openai``) or a local model folder
(``transformers``) without a second HTTP client.

Messages: an optional system message, then user messages whose content is a
string or a list of ``text`` / ``image_url`` parts (``data:`` URLs). Texts are
joined with newlines; the last image is sent.
"""

from __future__ import annotations

import base64
from typing import Any, Callable, Mapping

from capaudit.llm.base import BACKENDS, GenRequest, make_backend

__all__ = ["ChatFn", "backend_chat", "make_chat"]

ChatFn = Callable[[list], str]


def backend_chat(backend) -> ChatFn:
    """Adapt a :class:`~capaudit.llm.base.Backend` to ``chat(messages)``.

    A failed call (the backend's error after its retries, or an empty text)
    raises :class:`ConnectionError`, which callers count as a failed call.
    The function's ``accepts_images`` says whether the backend can see images.
    """
    def chat(messages: list) -> str:
        system, texts, image, mime = None, [], None, "image/jpeg"
        for m in messages:
            if m["role"] == "system":
                system = m["content"]
                continue
            content = m["content"]
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for p in parts:
                if p.get("type") == "text":
                    texts.append(p["text"])
                elif p.get("type") == "image_url":
                    head, _, data = p["image_url"]["url"].partition(",")
                    mime = head[5:].split(";")[0] or mime
                    image = base64.b64decode(data)
        res = backend.generate([GenRequest("\n".join(texts), image, mime, system)])[0]
        if res.error is not None or res.text is None:
            raise ConnectionError(res.error or "empty response")
        return res.text

    chat.accepts_images = getattr(backend, "accepts_images", True)
    return chat


def make_chat(backend: str = "openai", model: str = "", *, base_url: str | None = None,
              api_key_env: str | None = None, timeout_s: float | None = None,
              max_retries: int | None = None, params: Mapping[str, Any] | None = None,
              options: Mapping[str, Any] | None = None) -> ChatFn:
    """A chat function over the named registered backend, greedy (temperature 0) by default.

    ``base_url`` / ``api_key_env`` / ``timeout_s`` / ``max_retries`` apply to
    backends that have them (``openai``); ``options`` passes any other backend
    field (``device`` for ``transformers``).
    """
    fields = {"base_url": base_url, "api_key_env": api_key_env, "timeout_s": timeout_s,
              "max_retries": max_retries}
    known = set(getattr(BACKENDS.get(backend), "__dataclass_fields__", {}))
    opts = {k: v for k, v in fields.items() if v is not None and k in known}
    opts.update(options or {})
    if "concurrency" in known:
        opts.setdefault("concurrency", 1)  # the filter runs its own thread pool
    opts.update(model=model, params={"temperature": 0, **dict(params or {})})
    return backend_chat(make_backend(backend, opts))
