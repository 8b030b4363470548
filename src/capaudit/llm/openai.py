"""OpenAI-compatible chat-completions backend (vLLM, llama.cpp, Ollama, TGI, hosted APIs).

Why plain ``urllib`` and not the ``openai`` package: the protocol is one POST,
and owning the loop lets us bound concurrency, set timeouts, and retry with
exponential backoff on 429/5xx exactly as we want, with no extra dependency.
Images travel as ``data:`` URLs inside the user message. The API key is read
from an environment variable named in the config, never from the config.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Iterator

from capaudit.core.ranges import check_number
from capaudit.llm.base import CAPPED, Backend, GenRequest, GenResult
from capaudit.errors import InputError
from capaudit.core.redact import redact
from capaudit.llm.transport import Connections, DeadlineExceeded, post

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_REPLY_BYTES = 4_000_000    # a chat answer is kilobytes (logprobs add some); never more
MAX_ANSWER_CHARS = 200_000     # ~50k tokens: longer is a broken server, not an answer
MAX_USAGE_TOKENS = 10_000_000  # per reply; beyond any context window: a broken counter
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_api_key_env(name: str | None, must_be_set: bool = False) -> None:
    """Refuse an ``api_key_env`` that is not an environment variable NAME.

    A key pasted there by mistake (``--api-key-env sk-...``) would otherwise be
    stored in ``runs`` and ``provenance.json`` while requests go out without
    it; the message never repeats the value. ``must_be_set``: the user named
    the variable, so it being unset is a mistake too.
    """
    if not name:
        return
    if not _ENV_NAME.fullmatch(str(name)):
        raise InputError("--api-key-env takes the NAME of an environment variable that holds "
                         "the API key, not the key itself (the value given was neither used "
                         "nor stored)", fix="export MY_KEY=... and pass --api-key-env MY_KEY")
    if must_be_set and not os.environ.get(name):
        raise InputError(f"--api-key-env names {name}, which is not set (or empty) in the "
                         "environment", fix=f"export {name}=... or leave --api-key-env out")


def is_loopback(host: str) -> bool:
    host = (host or "").strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tokens(value) -> int | None:
    """A usage figure: absent counts 0; negative, absurd or non-integer is ``None`` (not
    summed into cost: -10**9 tokens once printed a cost of -2,500)."""
    if value is None:
        return 0
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_USAGE_TOKENS
    return value if ok else None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_reply(raw: bytes) -> tuple[str, int | None, int | None, list | None] | str:
    """(text, tokens in, tokens out, logprobs) of a chat-completions body, or why it is
    malformed; a token count is ``None`` where the server's figure cannot be true.

    A 200 can still carry an HTML error page from a proxy, bytes in another
    encoding or a body cut short: that sample is retried, then reported.
    """
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"not UTF-8 ({len(raw)} bytes: {raw[:60]!r})"
    try:
        data = json.loads(body)
    except ValueError:
        return f"not JSON ({len(raw)} bytes: {body[:80]!r})"
    except RecursionError:
        return f"JSON nested too deeply ({len(raw)} bytes)"
    try:
        text = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return f"no choices[0].message.content: {body[:200]}"
    if text is not None and not isinstance(text, str):
        return f"message content is not a string: {body[:200]}"
    if text is not None and len(text) > MAX_ANSWER_CHARS:
        return f"answer of {len(text):,} characters is over the {MAX_ANSWER_CHARS:,} limit"
    if text:  # a lone "\ud800" escape is valid JSON but no text: the store and Arrow refuse it
        text = _LONE_SURROGATE.sub("\ufffd", text)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    # the first answer tokens' log-probabilities, where the server sends them (P(yes) of a judge)
    lp = data["choices"][0].get("logprobs") if isinstance(data["choices"][0], dict) else None
    lp = lp.get("content") if isinstance(lp, dict) else None
    return ((text or "").strip(), _tokens(usage.get("prompt_tokens")),
            _tokens(usage.get("completion_tokens")), lp[:8] if isinstance(lp, list) else None)


def check_base_url(url, flag: str = "--base-url"):
    """The parts of an http(s) server URL, or one line naming ``flag``: a malformed one
    (``http://[::1/v1``) was a ValueError traceback from ``urllib``."""
    try:
        parts = urllib.parse.urlsplit(str(url))
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise InputError(f"{flag} {str(url)!r} is not an http(s) URL",
                         fix="e.g. http://127.0.0.1:8000/v1")
    return parts

@dataclass
class OpenAIBackend(Backend):
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout_s: float = 60.0             # the longest silence while reading a reply
    connect_timeout_s: float | None = None   # default min(timeout_s, 10)
    deadline_s: float | None = None     # a whole request; default 3 x timeout_s
    max_retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    budget: Any = None           # a RequestBudget: every attempt takes one (None: no cap)

    name = "openai"

    def __post_init__(self):
        super().__post_init__()
        check_api_key_env(self.api_key_env)
        parts = check_base_url(self.base_url)
        # a loopback server is never reached through $http_proxy (which would also see the
        # bearer token); other hosts follow the proxy variables, no_proxy included
        self._proxies = {} if is_loopback(parts.hostname) else None
        self._connections = Connections()
        check_number("concurrency", self.concurrency, 1, 1024)
        check_number("max_retries", self.max_retries, 0, 100)
        for name in ("timeout_s", "connect_timeout_s", "deadline_s"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1e6):
                raise InputError(f"{name} must be a number of seconds above 0, not {value!r}",
                                 fix="e.g. timeout_s: 60")

    def abort(self) -> None:
        """Shut every open connection down (Ctrl-C): blocked requests end at once."""
        self._connections.abort_all()

    def _key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def _post(self, body: bytes) -> tuple[int, bytes | str, float | None]:
        """(status, body bytes, Retry-After) of one POST; transport errors raise."""
        headers = {"Content-Type": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self._url(), data=body, headers=headers, method="POST")
        try:
            status, raw = post(request, proxies=self._proxies, connections=self._connections,
                               connect_s=self.connect_timeout_s or min(self.timeout_s, 10.0),
                               read_s=self.timeout_s,
                               total_s=self.deadline_s or 3 * self.timeout_s,
                               max_bytes=MAX_REPLY_BYTES)
            if raw is None:  # retried like any malformed reply, then reported
                return status, (f"reply over {MAX_REPLY_BYTES} bytes refused (a chat answer "
                                "is kilobytes; nothing stored)"), None
            return status, raw, None
        except urllib.error.HTTPError as exc:
            retry_after = exc.headers.get("Retry-After") if exc.headers else None
            try:
                retry_after = float(retry_after) if retry_after is not None else None
            except ValueError:
                retry_after = None  # an HTTP date: use our own backoff
            if retry_after is not None and not 0 <= retry_after < float("inf"):
                retry_after = None  # negative or NaN would crash time.sleep
            try:
                text = exc.read(4096).decode("utf-8", errors="replace")[:300]
            except (OSError, http.client.HTTPException):
                text = ""
            if 300 <= exc.code < 400 and exc.headers and exc.headers.get("Location"):
                text = (f"redirected to {exc.headers['Location'][:200]}, not followed (the "
                        "key is sent to the URL you give only; give the final URL)")
            return exc.code, text, retry_after

    def _one(self, req: GenRequest) -> GenResult:
        """One sample: retried on transport errors, 408/429/5xx and malformed 200 replies."""
        body = json.dumps({"model": self.model, "messages": req.messages(), **self.params}).encode()
        rng = random.Random(zlib.crc32(body))  # jitter, reproducible per request
        last = "no attempt"
        attempts = 0
        for attempt in range(self.max_retries + 1):
            if self.budget is not None and not self.budget.take():
                last = CAPPED if not attempts else f"{last}; then {CAPPED}"
                break
            attempts += 1
            try:
                status, data, retry_after = self._post(body)
            except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError, timeouts
                status, data, retry_after = 0, f"{exc.__class__.__name__}: {exc}", None
                if isinstance(exc, (InterruptedError, DeadlineExceeded)):
                    last = str(data)
                    break  # Ctrl-C, or a server too slow to be worth asking again
            if status == 200:
                parsed = parse_reply(data) if isinstance(data, bytes) else data
                if isinstance(parsed, tuple):
                    text, tin, tout, lp = parsed
                    return GenResult(redact(text, self._key()), tin or 0, tout or 0,
                                     attempts=attempts, logprobs=lp,
                                     bad_usage=tin is None or tout is None)
                last = f"malformed response: {parsed}"
            else:
                last = f"HTTP {status}: {data}" if status else str(data)
                if status and status not in RETRY_STATUS:
                    break  # 400/401/404: retrying cannot help
            if attempt < self.max_retries:
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
                delay = retry_after if retry_after is not None else delay * (0.5 + rng.random())
                time.sleep(min(delay, self.max_backoff_s))
        return GenResult(None, error=redact(last, self._key()), attempts=attempts)

    def _iter_uncached(self, requests: list[GenRequest]) -> Iterator[tuple[int, GenResult]]:
        t0 = time.perf_counter()
        try:
            if len(requests) == 1 or self.concurrency <= 1:
                for i, req in enumerate(requests):
                    yield i, self._counted(self._one(req))
                return
            pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests)))
            try:
                futures = {pool.submit(self._one, r): i for i, r in enumerate(requests)}
                for fut in as_completed(futures):
                    yield futures[fut], self._counted(fut.result())
            except BaseException:  # Ctrl-C reaches only this thread: stop the workers now
                self.abort()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
        finally:
            self.stats.seconds += time.perf_counter() - t0

    def _counted(self, res: GenResult) -> GenResult:
        # counted in the calling thread: worker threads never touch the counters
        self.stats.requests += res.attempts
        self.stats.retries += max(res.attempts - 1, 0)
        return res

    def _generate_uncached(self, requests: list[GenRequest]) -> list[GenResult]:
        out: list[GenResult | None] = [None] * len(requests)
        for i, res in self._iter_uncached(requests):
            out[i] = res
        return out  # type: ignore[return-value]
