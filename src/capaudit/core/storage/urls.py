"""Locations as text: a URL or a local path, brace lists, joins and names, without fsspec.

Why apart from :mod:`capaudit.core.storage.fs`: every command looks at the paths it is given
(is this a URL? which backend? what is the shard's name?) before anything is read, and a
local run must not pay fsspec's import for that. Nothing here touches a file system.

- :func:`is_url`: ``s3://``, ``gs://``, ``hf://``, ``http(s)://`` ... (``file://`` is a URL
  too: it says "every node sees this path", see :mod:`capaudit.executors.ray`).
- :func:`expand_braces`: webdataset's brace lists, ``shard-{00000..00099}.tar`` (zero
  padding kept) and ``{train,val}``, expanded here before any glob: webdataset splits its
  URLs on ``::``, which is fsspec's chaining syntax, so its own expansion cannot be used.
- :func:`join`, :func:`name_of`, :func:`parent_of`: path arithmetic that never turns
  ``s3://b/k`` into ``s3:/b/k`` (what ``pathlib.Path`` does to a URL).
- :func:`shown_url`: a URL as it may be printed or stored (userinfo, signatures and
  tokens masked by :func:`capaudit.core.redact.redact`).
- :func:`parse_spec`: a spec of inputs read once into a :class:`Spec` (where it is, the
  names of its brace list, the folder they are relative to, how it is shown), which
  :mod:`capaudit.core.storage.listing` lists without reading the text again.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from capaudit.errors import InputError

__all__ = ["is_url", "protocol_of", "expand_braces", "has_glob", "join", "name_of",
           "parent_of", "shown_url", "local_path", "is_remote", "on_disk", "Location", "locate",
           "Spec", "parse_spec",
           "READ_ONLY", "BACKENDS", "MAX_EXPANDED"]

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
# protocol -> (module that implements it, the capaudit extra that installs it)
BACKENDS = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"),
            "gcs": ("gcsfs", "gcs"), "hf": ("huggingface_hub", "hf"),
            "http": ("aiohttp", "http"), "https": ("aiohttp", "http"),
            "memory": ("fsspec", "http"), "file": ("fsspec", "http")}
READ_ONLY = {"http": "an http(s) server cannot be written or listed",
             "https": "an http(s) server cannot be written or listed",
             "hf": "the Hub rate-limits commits: write to a local folder and upload it with "
                   "`huggingface-cli upload`"}
MAX_EXPANDED = 1_000_000          # names one brace pattern may stand for
_RANGE = re.compile(r"\{(-?\d+)\.\.(-?\d+)\}")
_LIST = re.compile(r"\{([^{}]*,[^{}]*)\}")


def is_url(location) -> bool:
    """``location`` names a file system by its protocol (``s3://bucket/key``)."""
    return isinstance(location, str) and bool(_SCHEME.match(location))


def protocol_of(location) -> str:
    """``"s3"``, ``"gs"``, ... of a URL; ``"local"`` for a path."""
    m = _SCHEME.match(location) if isinstance(location, str) else None
    return m.group(1).lower() if m else "local"


def local_path(location) -> Path | None:
    """The local path ``location`` names (a path, or a ``file://`` URL); None for a URL."""
    if isinstance(location, Path) or not is_url(location):
        return Path(location)
    if protocol_of(location) == "file":
        return Path(location[len("file://"):])
    return None


def is_remote(location) -> bool:
    """``location`` is a URL other than ``file://``: object storage or a server. Only the
    storage layer asks; code above it calls the layer, or :func:`on_disk` where a reader
    needs a local file or an output is written in place."""
    return is_url(location) and local_path(location) is None


def on_disk(location) -> bool:
    """``location`` is a local path (or a ``file://`` URL): a reader that takes a path can
    open it, and it can be written in place."""
    return not is_remote(location)


def has_glob(text: str) -> bool:
    return any(ch in str(text) for ch in "*?[")


def _expand_one(text: str) -> list[str] | None:
    """The names of the leftmost brace group of ``text`` (None: no group)."""
    found = [m for m in (_RANGE.search(text), _LIST.search(text)) if m]
    if not found:
        return None
    m = min(found, key=lambda x: x.start())
    if m.re is _LIST:
        return [text[:m.start()] + part + text[m.end():] for part in m.group(1).split(",")]
    a, b = m.group(1), m.group(2)
    lo, hi = int(a), int(b)
    width = len(a.lstrip("-")) if a.lstrip("-").startswith("0") and len(a.lstrip("-")) > 1 else 0
    if abs(hi - lo) + 1 > MAX_EXPANDED:
        raise InputError(f"the brace range {m.group(0)} stands for over {MAX_EXPANDED:,} "
                         "names", path=shown_url(text), fix="split it, or list a folder")
    step = 1 if hi >= lo else -1
    return [text[:m.start()] + str(i).zfill(width) + text[m.end():]
            for i in range(lo, hi + step, step)]


def expand_braces(text: str) -> list[str]:
    """Every name of a brace pattern, in the pattern's order: ``a-{000..002}.tar`` ->
    ``a-000.tar``, ``a-001.tar``, ``a-002.tar``; ``{x,y}`` -> ``x``, ``y``; several groups
    multiply. Text without braces is its own single name."""
    out, todo = [], [str(text)]
    while todo:
        item = todo.pop(0)
        more = _expand_one(item)
        if more is None:
            out.append(item)
        else:
            todo[:0] = more
        if len(out) + len(todo) > MAX_EXPANDED:
            raise InputError(f"the brace pattern stands for over {MAX_EXPANDED:,} names",
                             path=shown_url(text), fix="split it, or list a folder")
    return out


def join(base, *names: str) -> str:
    """``base`` with ``names`` appended, ``/``-separated for a URL."""
    if not is_url(base):
        return os.path.join(str(base), *names)
    out = str(base).rstrip("/")
    for name in names:
        out += "/" + str(name).strip("/")
    return out


def name_of(location) -> str:
    """The last part of a path or URL (query string dropped)."""
    text = str(location).split("?", 1)[0].rstrip("/")
    return text.rsplit("/", 1)[-1] if is_url(text) else Path(text).name


def parent_of(location) -> str:
    """The folder holding a path or URL (a bucket's root for ``s3://b/k``)."""
    if not is_url(location):
        return str(Path(location).parent)
    text = str(location).split("?", 1)[0].rstrip("/")
    head, _, tail = text.rpartition("/")
    return text if head.endswith(":/") else head


def shown_url(location) -> str:
    """``location`` as it may be printed, logged or stored: no credentials in it."""
    from capaudit.core.redact import redact

    return redact(str(location)) or ""


@dataclass(frozen=True, slots=True)
class Location:
    """One path or URL (a spec, a brace list's name, a glob), read once: its protocol says
    where it is; the rest is asked of it when listing needs it."""

    text: str
    protocol: str               # "local", "file", "s3", ...

    @property
    def shown(self) -> str:
        """As it may be printed or stored: no credentials."""
        return shown_url(self.text)

    @property
    def path(self) -> Path | None:
        """The path on this machine (a path, or a ``file://`` URL's); None: a URL."""
        if self.protocol == "local":
            return Path(self.text)
        return Path(self.text[len("file://"):]) if self.protocol == "file" else None

    @property
    def folder(self) -> Location:
        return Location(parent_of(self.text), self.protocol)

    @property
    def name_prefix(self) -> str | None:
        """A glob's name up to its first wildcard, when its wildcards are all in its name
        (the prefix a store lists server-side); None: one is in a folder part, or ``**``."""
        last = self.name
        if self.folder.globbed or "**" in last:
            return None
        return last[:min(last.index(c) for c in "*?[" if c in last)]

    @property
    def name(self) -> str:
        return name_of(self.text)

    @property
    def globbed(self) -> bool:
        """A wildcard in it: its files are matched."""
        return has_glob(self.text)


def locate(text) -> Location:
    """``text`` (a path or a URL) as a :class:`Location`."""
    return Location(str(text), protocol_of(text))


@dataclass(frozen=True, slots=True)
class Spec(Location):
    """A spec of inputs (one file, a folder, a glob, a brace list, a manifest), read once:
    ``text`` as it was written (what a run records), ``listed`` as it is listed (a
    ``file://`` URL's path: the local functions take paths).

    Why: listing asks of a spec where it is, which names its brace list stands for and which
    folder they are relative to; asking the text again at each step of a listing sent it back
    and forth through this module."""

    listed: str
    names: tuple[Location, ...]  # its brace list's names, in order (``listed`` alone: none)
    root: str                   # the folder its names are relative to (see :func:`parse_spec`)

    @property
    def shown_listed(self) -> str:
        return shown_url(self.listed)

    @property
    def literal(self) -> bool:
        """No wildcard and no brace list: one file or one folder."""
        return "{" not in self.text and not self.globbed


def parse_spec(spec) -> Spec:
    """``spec`` read once. Its root is the part before the first wildcard or brace, up to
    the last separator (the spec itself when it has neither: a folder or a file)."""
    given = str(spec)
    protocol = protocol_of(given)
    listed = given[len("file://"):] if protocol == "file" else given
    cut = min((i for i, ch in enumerate(listed) if ch in "*?[{"), default=None)
    root = listed if cut is None else os.path.dirname(listed[:cut]) or "."
    names = tuple(map(locate, expand_braces(listed))) if "{" in listed else (locate(listed),)
    return Spec(given, protocol, listed, names, root)
