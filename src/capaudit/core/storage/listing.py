"""The inputs a spec names: a folder, a glob, a brace list, a manifest or one file, as URLs.

Why here and not in each command: listing is where object storage costs money and time.
``glob`` on S3 lists the whole prefix (billed per 1,000 objects; minutes with millions of
them), http(s) cannot be listed at all, and webdataset's brace lists must be expanded before
any glob (webdataset splits URLs on ``::``, fsspec's chaining syntax). So:

- brace lists (``shard-{00000..00099}.tar``, ``{a,b}``) are expanded first
  (:func:`capaudit.core.storage.urls.expand_braces`); names without a wildcard are taken as given
  and checked with one listing per folder under their common name prefix (never one
  request per name); on http(s) they are taken unchecked (a missing one fails when read);
- a glob whose wildcards are in the last part is listed under its fixed prefix, server-side
  (``s3://b/laion/shard-*.tar`` lists ``laion/shard-`` only), then matched here; a wildcard
  in a folder part falls back to fsspec's level-by-level glob;
- a folder is listed one level deep, like a local folder;
- a manifest (a ``.txt`` file whose lines are shard names, relative to it, or URLs) is
  read instead of listing anything: the cheapest way to name a million shards.

Every entry comes back with its size and identity (ETag, checksum, modification time), the
completion markers' key to the input's content, at no extra request. Sorted by location:
the order of a sharded run, the same whatever form the spec took.
"""

from __future__ import annotations

import fnmatch
import glob as globlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from capaudit.core.storage.fs import filesystem, info_identity, retrying
from capaudit.core.storage.urls import (expand_braces, has_glob, is_remote, is_url, join,
                                        local_path, name_of, parent_of, protocol_of, shown_url)
from capaudit.errors import InputError

__all__ = ["Entry", "list_files", "list_tree", "MANIFEST_SUFFIX"]

MANIFEST_SUFFIX = ".txt"
_UNLISTABLE = ("http", "https")


@dataclass(frozen=True)
class Entry:
    """One input: its location (a path or URL), size (None: unknown until read) and the
    identity a remote store reported (empty for a local file: markers hash it)."""

    location: str
    size: int | None = None
    identity: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        return name_of(self.location)


def list_files(spec, storage_options: dict | None = None, *,
               manifest: bool = False, recursive: bool = False) -> list[Entry]:
    """The files ``spec`` names (see the module doc), sorted; ``manifest``: a ``.txt`` spec is
    a list of files (shards: never a ``.txt`` themselves); ``recursive``: a folder's files at
    any depth (a corpus cut into sub-folders), not one level."""
    spec = str(spec)
    if manifest and spec.endswith(MANIFEST_SUFFIX) and not has_glob(spec) and "{" not in spec:
        return _from_manifest(spec, storage_options)
    found: dict[str, Entry] = {}
    names = expand_braces(spec)
    explicit = [n for n in names if not has_glob(n)]
    for pattern in (n for n in names if has_glob(n)):
        for e in _glob(pattern, storage_options):
            found[e.location] = e
    if len(explicit) == 1 and len(names) == 1:
        for e in _one(explicit[0], storage_options, recursive):
            found[e.location] = e
    elif explicit:
        for e in _named(explicit, storage_options):
            found[e.location] = e
    return [found[k] for k in sorted(found)]


def _local_entry(path: Path) -> Entry:
    return Entry(str(path), path.stat().st_size)


def _one(location: str, options, recursive: bool = False) -> list[Entry]:
    """A folder (its files, one level or ``recursive``) or one file."""
    path = local_path(location)
    if path is not None:
        if path.is_dir():
            found = path.rglob("*") if recursive else path.iterdir()
            return [_local_entry(p) for p in sorted(found) if p.is_file()]
        if path.is_file():
            return [_local_entry(path)]
        raise InputError("no such file or folder", path=location, fix="check the path")
    if protocol_of(location) in _UNLISTABLE:
        return [Entry(location)]
    fs, path = filesystem(location, options)
    info = retrying(lambda: fs.info(path), location)   # FileNotFoundError: one line
    if info.get("type") != "directory":
        return [Entry(location, info.get("size"), info_identity(info))]
    if recursive:
        items = list(retrying(lambda: fs.find(path, detail=True), location).values())
    else:
        items = retrying(lambda: fs.ls(path, detail=True), location)
    return [_remote_entry(fs, i) for i in items if i.get("type", "file") == "file"]


def _remote_entry(fs, info: dict) -> Entry:
    return Entry(fs.unstrip_protocol(info["name"]), info.get("size"), info_identity(info))


def _named(locations: list[str], options) -> list[Entry]:
    """Names taken as given (a brace list): checked by one listing per folder under the
    names' common prefix; on http(s), unchecked."""
    out, folders = [], {}
    for loc in locations:
        if local_path(loc) is not None:
            if not Path(local_path(loc)).is_file():
                raise InputError("no such file", path=loc, fix="check the brace pattern")
            out.append(_local_entry(local_path(loc)))
        elif protocol_of(loc) in _UNLISTABLE:
            out.append(Entry(loc))
        else:
            folders.setdefault(parent_of(loc), []).append(loc)
    for folder, locs in folders.items():
        listed = {e.location: e for e in _listed(folder, os.path.commonprefix(
            [name_of(x) for x in locs]), options)}
        for loc in locs:
            if loc not in listed:
                raise InputError("no such object", path=shown_url(loc),
                                 fix="check the brace pattern and the bucket")
            out.append(listed[loc])
    return out


def _listed(folder: str, prefix: str, options) -> list[Entry]:
    """The files directly in ``folder`` whose names start with ``prefix``: a server-side
    prefix where the backend takes one (s3fs, gcsfs), else one listing of the folder."""
    fs, path = filesystem(folder, options)
    try:
        items = retrying(lambda: fs.find(path, maxdepth=1, prefix=prefix, detail=True),
                         folder)
    except TypeError:   # a backend without server-side prefixes
        items = retrying(lambda: fs.find(path, maxdepth=1, detail=True), folder)
    items = items.values() if isinstance(items, dict) else items
    return [_remote_entry(fs, i) for i in items if i.get("type", "file") == "file"
            and name_of(i["name"]).startswith(prefix)]


def _glob(pattern: str, options) -> list[Entry]:
    path = local_path(pattern)
    if path is not None:
        return [_local_entry(Path(p)) for p in sorted(globlib.glob(str(path)))
                if Path(p).is_file()]
    if protocol_of(pattern) in _UNLISTABLE:
        raise InputError("an http(s) server cannot be listed, so a wildcard cannot be matched "
                         "there", path=shown_url(pattern), fix="name the files, e.g. with a "
                         "brace list: https://host/shard-{00000..00099}.tar")
    folder, last = parent_of(pattern), name_of(pattern)
    if not has_glob(folder) and "**" not in last:
        fixed = last[:min(last.index(c) for c in "*?[" if c in last)]
        return [e for e in _listed(folder, fixed, options) if fnmatch.fnmatchcase(e.name, last)]
    fs, path = filesystem(pattern, options)
    items = retrying(lambda: fs.glob(path, detail=True), pattern)
    return [_remote_entry(fs, i) for i in items.values() if i.get("type") == "file"]


def _normal(location: str) -> str:
    """``a/b/../c`` -> ``a/c`` in a path or a URL's path (a manifest's relative names)."""
    import posixpath

    if not is_url(location):
        return os.path.normpath(location)
    scheme, _, rest = location.partition("://")
    root, _, path = rest.partition("/")
    return f"{scheme}://{root}/{posixpath.normpath(path).lstrip('/')}"


def _from_manifest(spec: str, options) -> list[Entry]:
    """The files a manifest lists, one per line (relative to the manifest, or URLs)."""
    from capaudit.core.storage.fs import open_input

    with open_input(spec, options) as fh:
        lines = [ln.strip() for ln in fh.read().decode("utf-8").splitlines()]
    base = parent_of(spec)
    locations = [ln if is_url(ln) or os.path.isabs(ln) else _normal(join(base, ln))
                 for ln in lines if ln and not ln.startswith("#")]
    if not locations:
        raise InputError("the manifest lists no file", path=shown_url(spec),
                         fix="one shard name or URL per line")
    return sorted(_named(locations, options), key=lambda e: e.location)


# -- a tree of files by location string (filter run --shards) ---------------------------
def _root(spec: str) -> str:
    """The folder a glob's or a brace list's names are relative to: its part before the
    first wildcard or brace, up to the last separator."""
    cut = min((i for i, ch in enumerate(spec) if ch in "*?[{"), default=len(spec))
    return os.path.dirname(spec[:cut]) or "."


def _local(spec: str) -> tuple[list[str], str] | None:
    """The files of a local spec and their root (None: ``spec`` is one file)."""
    if "{" in spec:
        paths = [p for s in expand_braces(spec)
                 for p in (sorted(globlib.glob(s)) if has_glob(s) else [s])]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise InputError(f"{len(missing):,} shard(s) of the brace list are missing, "
                             f"the first {missing[0]}", path=spec, fix="check --shards")
        return paths, _root(spec)
    if has_glob(spec):
        return sorted(globlib.glob(spec, recursive=True)), _root(spec)
    if os.path.isdir(spec):
        return sorted(str(p) for p in Path(spec).rglob("*") if p.is_file()
                      and not p.name.startswith(".")), spec
    if os.path.isfile(spec):
        return None
    raise InputError("no such shard folder, file, glob or brace list", path=spec,
                     fix="check --shards")


def _remote(spec: str) -> tuple[list, str] | None:
    """The entries (:class:`Entry`) of a URL spec and their
    root (None: one object). Listed with narrow prefixes; a folder recursively."""
    if "{" in spec or has_glob(spec):
        return list_files(spec), _root(spec)
    entries = list_files(spec, recursive=True)
    if len(entries) == 1 and entries[0].location.rstrip("/") == spec.rstrip("/"):
        return None
    return [e for e in entries if not e.name.startswith(".")], spec.rstrip("/")


def list_tree(spec: str) -> tuple[list[tuple[str, str, int | None, dict]], str]:
    """``(location, name relative to the listing's root, size, identity)`` of every file of
    one file, a folder (recursively, hidden names left out), a glob or a brace list, and
    ``spec`` as listed (a ``file://`` URL's path); the identity (ETag, size, modification
    time) is what the store reported while listing (empty for a local file)."""
    spec = str(spec)
    if is_remote(spec):
        found = _remote(spec)
        if found is None:
            e = list_files(spec)[0]
            return [(e.location, e.name, e.size, dict(e.identity))], spec
        entries, root = found
        return [(e.location, e.location[len(root):].lstrip("/") if e.location.startswith(
            root + "/") else e.name, e.size, dict(e.identity)) for e in entries], spec
    spec = spec if "://" not in spec else spec[len("file://"):]   # file:///PATH: PATH
    found = _local(spec)
    if found is None:
        return [(spec, os.path.basename(spec), os.stat(spec).st_size, {})], spec
    paths, root = found
    return [(p, os.path.relpath(p, root), os.stat(p).st_size, {}) for p in paths
            if os.path.isfile(p)], spec
