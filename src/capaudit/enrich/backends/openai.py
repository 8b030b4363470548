"""OpenAI-compatible chat-completions backend (vLLM, llama.cpp, Ollama, TGI, hosted APIs).

Why plain ``urllib`` and not the ``openai`` package: the protocol is one POST,
and owning the loop lets us bound concurrency, set timeouts, and retry with
exponential backoff on 429/5xx exactly as we want, with no extra dependency.
Images travel as ``data:`` URLs inside the user message. The API key is read
from an environment variable named in the config, never from the config.
"""

from __future__ import annotations

import base64
import json
import os
import random
import time
import zlib
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from capaudit.enrich.backends.base import Backend, GenRequest, GenResult

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass
class OpenAIBackend(Backend):
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0

    name = "openai"

    def _url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def _payload(self, req: GenRequest) -> dict:
        content: list[dict] | str
        if req.image is not None:
            data = base64.b64encode(req.image).decode("ascii")
            content = [{"type": "text", "text": req.prompt},
                       {"type": "image_url",
                        "image_url": {"url": f"data:{req.image_mime};base64,{data}"}}]
        else:
            content = req.prompt
        messages = ([{"role": "system", "content": req.system}] if req.system else []) + \
            [{"role": "user", "content": content}]
        return {"model": self.model, "messages": messages, **self.params}

    def _post(self, body: bytes) -> tuple[int, dict | str, float | None]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self._url(), data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                return resp.status, json.loads(resp.read().decode("utf-8")), None
        except urllib.error.HTTPError as exc:
            retry_after = exc.headers.get("Retry-After") if exc.headers else None
            try:
                retry_after = float(retry_after) if retry_after is not None else None
            except ValueError:
                retry_after = None
            text = exc.read().decode("utf-8", errors="replace")[:300]
            return exc.code, text, retry_after

    def _one(self, req: GenRequest) -> GenResult:
        body = json.dumps(self._payload(req)).encode()
        rng = random.Random(zlib.crc32(body))  # jitter, reproducible per request
        last = "no attempt"
        attempts = 0
        for attempt in range(self.max_retries + 1):
            attempts += 1
            try:
                status, data, retry_after = self._post(body)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                status, data, retry_after = 0, f"{exc.__class__.__name__}: {exc}", None
            if status == 200 and isinstance(data, dict):
                try:
                    text = data["choices"][0]["message"]["content"]
                except (KeyError, IndexError, TypeError):
                    return GenResult(None, error=f"malformed response: {str(data)[:200]}",
                                     attempts=attempts)
                usage = data.get("usage") or {}
                lp = (data["choices"][0].get("logprobs") or {}).get("content") \
                    if isinstance(data["choices"][0].get("logprobs"), dict) else None
                return GenResult((text or "").strip(), int(usage.get("prompt_tokens", 0)),
                                 int(usage.get("completion_tokens", 0)), attempts=attempts,
                                 logprobs=lp[:8] if isinstance(lp, list) else None)
            last = f"HTTP {status}: {data}" if status else str(data)
            if status and status not in RETRY_STATUS:
                break  # 400/401/404: retrying cannot help
            if attempt < self.max_retries:
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
                delay = retry_after if retry_after is not None else delay * (0.5 + rng.random())
                time.sleep(min(delay, self.max_backoff_s))
        return GenResult(None, error=last, attempts=attempts)

    def _generate_uncached(self, requests: list[GenRequest]) -> list[GenResult]:
        t0 = time.perf_counter()
        if len(requests) == 1 or self.concurrency <= 1:
            out = [self._one(r) for r in requests]
        else:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
                out = list(pool.map(self._one, requests))  # keeps request order
        self.stats.seconds += time.perf_counter() - t0
        # counted here, in the calling thread: worker threads never touch the counters
        self.stats.requests += sum(r.attempts for r in out)
        self.stats.retries += sum(r.attempts - 1 for r in out)
        return out
