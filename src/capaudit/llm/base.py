"""The backend contract: a list of requests in, a list of results out, with counters.

Why batches of requests and not one call: HTTP backends overlap requests
(bounded concurrency), local models batch them on the device; the adapter
code does not care which. Failures are results too (``error`` set), so one bad
sample never drops a shard and every failure can be listed at the end.
Every backend goes through the same response cache (see :mod:`.cache`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping

from capaudit.core.registry import Registry
from capaudit.llm.cache import ResponseCache


@dataclass
class GenRequest:
    prompt: str
    image: bytes | None = None       # raw image bytes; VLM backends send them
    image_mime: str = "image/jpeg"
    system: str | None = None

    def image_sha256(self) -> str | None:
        return hashlib.sha256(self.image).hexdigest() if self.image is not None else None

    def messages(self) -> list[dict]:
        """The request as OpenAI chat messages (a chat backend's): the system message, then
        the prompt, with the image as a ``data:`` URL part."""
        content: list | str = self.prompt
        if self.image is not None:
            data = base64.b64encode(self.image).decode("ascii")
            content = [{"type": "text", "text": self.prompt},
                       {"type": "image_url",
                        "image_url": {"url": f"data:{self.image_mime};base64,{data}"}}]
        return ([{"role": "system", "content": self.system}] if self.system else []) + \
            [{"role": "user", "content": content}]


def request_key(backend: str, model, params, req: "GenRequest") -> str:
    """The response cache's key of a request (also read by a dry run, which builds no
    backend but leaves out what the cache already holds)."""
    text = json.dumps({"backend": backend, "model": model, "system": req.system,
                       "prompt": req.prompt, "image": req.image_sha256(),
                       "params": params}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def in_cache(path, backend: str, model, params, req: "GenRequest") -> bool:
    """Whether the response cache at ``path`` holds this request's answer, read without a
    backend and never created (a dry run writes nothing)."""
    from pathlib import Path

    if not path or not Path(path).exists():
        return False
    cache = ResponseCache(path)
    try:
        return cache.get(request_key(BACKENDS.get(backend).name, model, params, req)) is not None
    finally:
        cache.close()


CAPPED = "not sent: the request cap (--max-calls) is spent"


class RequestBudget:
    """HTTP requests still allowed, retries included (``--max-calls`` as a hard cap); shared
    by the backend's worker threads, so it is taken under a lock."""

    def __init__(self, n: int):
        import threading

        self.left, self._lock = int(n), threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True


@dataclass
class GenResult:
    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    cached: bool = False
    error: str | None = None
    attempts: int = 1                # HTTP attempts including retries
    logprobs: list | None = None     # top log-probabilities of the first answer tokens, if sent
    bad_usage: bool = False          # the server's token counts were impossible (counted as 0)

@dataclass
class Stats:
    """Counters every backend keeps; summed over shards for the final summary."""

    requests: int = 0        # calls that reached the model (not cache hits)
    retries: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    failures: int = 0
    seconds: float = 0.0
    usage_ignored: int = 0   # replies whose token counts were negative or absurd (not summed)

    def add(self, other: "Stats | Mapping") -> None:
        data = other if isinstance(other, Mapping) else other.__dict__
        for k, v in data.items():
            setattr(self, k, getattr(self, k) + v)


@dataclass
class Backend:
    """Base class: subclasses implement ``_generate_uncached`` for the cache misses.

    Backends that overlap requests also implement ``_iter_uncached`` (results
    as they arrive), so each answer is cached the moment it is paid for and a
    run killed mid-batch loses none of them.
    """

    model: str = ""
    params: dict = field(default_factory=dict)   # temperature, max_tokens, ...
    cache: ResponseCache | None = None
    name: ClassVar[str] = "base"
    accepts_images: ClassVar[bool] = True   # False: text-only, image requests fail per sample

    def __post_init__(self):
        self.stats = Stats()

    def cache_key(self, req: GenRequest) -> str:
        return request_key(self.name, self.model, self.params, req)

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        out: list[GenResult | None] = [None] * len(requests)
        misses = []
        for i, req in enumerate(requests):
            hit = self.cache.get(self.cache_key(req)) if self.cache is not None else None
            if hit is not None:
                out[i] = GenResult(hit["text"], hit.get("tokens_in", 0), hit.get("tokens_out", 0),
                                   cached=True, logprobs=hit.get("logprobs"))
                self.stats.cache_hits += 1
            else:
                misses.append(i)
        if misses:
            for j, res in self._iter_uncached([requests[i] for i in misses]):
                i = misses[j]
                out[i] = res
                if res.error is None:
                    self.stats.usage_ignored += res.bad_usage
                    self.stats.tokens_in += res.tokens_in
                    self.stats.tokens_out += res.tokens_out
                    if self.cache is not None:
                        self.cache.put(self.cache_key(requests[i]),
                                       {"text": res.text, "tokens_in": res.tokens_in,
                                        "tokens_out": res.tokens_out,
                                        **({"logprobs": res.logprobs} if res.logprobs else {})})
                else:
                    self.stats.failures += 1
        return out  # type: ignore[return-value]

    def _generate_uncached(self, requests: list[GenRequest]) -> list[GenResult]:
        raise NotImplementedError

    def _iter_uncached(self, requests: list[GenRequest]) -> Iterator[tuple[int, GenResult]]:
        """(index into ``requests``, result) in the order results arrive."""
        yield from enumerate(self._generate_uncached(requests))

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


class EchoBackend(Backend):
    """Deterministic stand-in (no model): for dry runs, executor tests and overhead."""

    name = "echo"

    def _generate_uncached(self, requests):
        self.stats.requests += len(requests)
        return [GenResult("ECHO " + " ".join(r.prompt.split()[-12:]),
                          len(r.prompt.split()), 12) for r in requests]


BACKENDS: Registry = Registry("backend", base=Backend, group="backends")
BACKENDS.register("openai", "capaudit.llm.openai:OpenAIBackend", version="1",
                  description="any OpenAI-compatible chat-completions server")
BACKENDS.register("transformers", "capaudit.llm.transformers_backend:"
                  "TransformersBackend", version="1", extra="ml",
                  description="a local causal LM (path, hub id or 'gemma3-270m')")
BACKENDS.register("transformers-captioner", "capaudit.llm.transformers_backend:"
                  "TransformersCaptionerBackend", version="1", extra="ml",
                  description="a local image-to-text captioner folder (BLIP, GIT)")
BACKENDS.register("echo", EchoBackend, version="1", description=EchoBackend.__doc__)


def make_backend(name: str, options: Mapping[str, Any], cache_path=None) -> Backend:
    """Build a backend from its config section (``model``, ``params``, backend options)."""
    cls = BACKENDS.get(name)
    opts = dict(options)
    cache = ResponseCache(cache_path) if cache_path else None
    return cls(cache=cache, **opts)
