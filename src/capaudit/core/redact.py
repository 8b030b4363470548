"""Secrets out of every line capaudit prints or writes: model calls, command lines, configs.

Why here, at the source: an error text travels far (the judge's one-line error, enrich's
``failures.jsonl`` and every ``shard-*.done.json``, the run rows), and a server may quote
the request back, its ``Authorization`` header included ("401: invalid token Bearer
sk-..."). Cleaning each text once, where the backend builds it, covers every place it
reaches. Removed: ``Authorization``/``api-key`` header values (any spelling a server
echoes: ``Authorization: ...``, ``"authorization": "..."``), ``Bearer`` tokens, the
user:password part of a URL, and any occurrence of the API key in use.
"""

from __future__ import annotations

import re

MASK = "[redacted]"
_HEADER = re.compile(
    r"""(?ix)
    ( ["']? (?:proxy-)?authorization ["']? \s* [:=] \s* ["']? )   # the header's name
    (?: (?:bearer|basic|token) \s+ )? [^\s"',}]+                   # its value
    | ( ["']? (?:x-)?api[-_]?key ["']? \s* [:=] \s* ["']? ) [^\s"',}&]+
    """)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=:-]{4,}")
_URL_USER = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")
_KEY_PARAM = re.compile(r"(?i)([?&](?:api[-_]?key|key|token|access_token)=)[^&\s\"']+")


def redact(text: str | None, *secrets: str | None) -> str | None:
    """``text`` with the header values, bearer tokens, URL passwords and each of
    ``secrets`` (values of at least 4 characters: shorter ones would mask ordinary
    words) replaced by ``[redacted]``."""
    if not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, MASK)
    text = _HEADER.sub(lambda m: (m.group(1) or m.group(2)) + MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _KEY_PARAM.sub(lambda m: m.group(1) + MASK, text)
    return _URL_USER.sub(lambda m: m.group(1) + MASK + "@", text)


def redact_values(obj):
    """``obj`` (a config: mappings, lists, strings) with :func:`redact` applied to every
    string, for what is stored or written beside an output (the run rows, provenance): a
    judge URL given as ``http://user:password@host`` must not land there."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_values(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_values(v) for v in obj]
    return obj
