"""Secrets out of every line capaudit prints or writes: model calls, command lines, configs.

Why here, at the source: an error text travels far (the judge's one-line error, enrich's
``failures.jsonl`` and every ``shard-*.done.json``, the run rows), and a server may quote
the request back, its ``Authorization`` header included ("401: invalid token Bearer
sk-..."). Cleaning each text once, where the backend builds it, covers every place it
reaches. Removed: ``Authorization``/``api-key`` header values (any spelling a server
echoes: ``Authorization: ...``, ``"authorization": "..."``), ``Bearer`` tokens, the
user:password part of a URL, and any occurrence of the API key in use.

Storage URLs (#32): a presigned URL's signature and credential parameters
(``X-Amz-Signature``, ``X-Goog-Credential``, an Azure ``sig``, any ``...token``/``...key``
parameter), key names written with a value (``aws_secret_access_key=...``,
``"secret": "..."``, ``HF_TOKEN=...``), tokens by their shape (``hf_...``, ``AKIA...``) and
the values of the credential variables in this process's environment
(:data:`SECRET_ENV`: ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``, ``FSSPEC_S3_SECRET``, ...)
wherever they appear.
"""

from __future__ import annotations

import os
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
# a value ends at "&", a space or a quote; a ":" or "," ends it only where a space or the end
# follows (a one-line error's "URL?token=X: no such file", "URL?token=X, row 1: ...")
_KEY_PARAM = re.compile(r"(?i)([?&;](?:api[-_]?key|key|token|access_token|sig|signature|"
                        r"x-(?:amz|goog)-[a-z0-9-]*(?:signature|credential|token)|"
                        r"[a-z0-9_.-]*(?:secret|password|token|credential|signature)"
                        r"|awsaccesskeyid)=)(?:[^&\s\"',:]|[,:](?=[^\s&\"']))+")
# a credential's name followed by its value: aws_secret_access_key = X, "secret": "X"
_NAMED = re.compile(r"""(?ix)
    ( ["']? \b (?:aws_secret_access_key|aws_session_token|aws_access_key_id|secret_access_key
      |session_token|access_key_id|hf_token|hugging_face_hub_token|client_secret|password
      |passwd|secret|private_key|fsspec_[a-z0-9]+_(?:key|secret|token|password))
      ["']? \s* [:=] \s* ["']? ) (?!\[redacted\])[^\s"',}&]+""")
_SHAPES = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16})\b")
# the environment variables whose values are credentials (any FSSPEC_<PROTO>_<KEY|SECRET..>)
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "HF_TOKEN",
              "HUGGING_FACE_HUB_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN")
_SECRET_NAME = re.compile(r"(?i)(secret|token$|password|passwd|private_key|credential|"
                          r"^api_key$|access_key)")


def env_secrets() -> list[str]:
    """The values of this process's credential variables (:data:`SECRET_ENV` and every
    ``FSSPEC_*`` variable whose name says key, secret, token or password)."""
    names = [n for n in os.environ if n in SECRET_ENV or n.startswith("FSSPEC_")
             and _SECRET_NAME.search(n)]
    return [os.environ[n] for n in names if len(os.environ[n]) >= 4]


def redact(text: str | None, *secrets: str | None) -> str | None:
    """``text`` with the header values, bearer tokens, URL passwords and each of
    ``secrets`` (values of at least 4 characters: shorter ones would mask ordinary
    words) replaced by ``[redacted]``."""
    if not text:
        return text
    for secret in (*secrets, *env_secrets()):
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, MASK)
    text = _HEADER.sub(lambda m: (m.group(1) or m.group(2)) + MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _KEY_PARAM.sub(lambda m: m.group(1) + MASK, text)
    text = _NAMED.sub(lambda m: m.group(1) + MASK, text)
    text = _SHAPES.sub(MASK, text)
    return _URL_USER.sub(lambda m: m.group(1) + MASK + "@", text)


def is_secret_name(name, siblings=()) -> bool:
    """A mapping key whose value is a credential (``secret``, ``aws_session_token``,
    ``password``; ``key`` beside a ``secret`` or ``token``: fsspec's storage options):
    masked whole by :func:`redact_values`."""
    if not isinstance(name, str):
        return False
    if name == "key":
        return bool({"secret", "token"} & set(siblings))
    return bool(_SECRET_NAME.search(name))


def redact_values(obj):
    """``obj`` (a config: mappings, lists, strings) with :func:`redact` applied to every
    string, for what is stored or written beside an output (the run rows, provenance): a
    judge URL given as ``http://user:password@host`` must not land there."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: MASK if is_secret_name(k, obj) and isinstance(v, str) and v
                else redact_values(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_values(v) for v in obj]
    return obj
