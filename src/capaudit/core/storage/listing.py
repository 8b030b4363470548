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
from capaudit.core.storage.urls import (Location, Spec, is_url, join, locate, name_of,
                                        parse_spec)
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
    spec = parse_spec(spec)
    if manifest and spec.listed.endswith(MANIFEST_SUFFIX) and spec.literal:
        return _from_manifest(spec, storage_options)
    return _listed_spec(spec, storage_options, recursive)


def _listed_spec(spec: Spec, options, recursive: bool = False) -> list[Entry]:
    """The files of a spec's names: its globs matched, one name listed, or several checked."""
    found: dict[str, Entry] = {}
    explicit = [n for n in spec.names if not n.globbed]
    for pattern in (n for n in spec.names if n.globbed):
        for e in _glob(pattern, options):
            found[e.location] = e
    if len(explicit) == 1 and len(spec.names) == 1:
        for e in _one(spec, options, recursive):
            found[e.location] = e
    elif explicit:
        for e in _named(explicit, options):
            found[e.location] = e
    return [found[k] for k in sorted(found)]


def _local_entry(path: Path) -> Entry:
    return Entry(str(path), path.stat().st_size)


def _one(spec: Spec, options, recursive: bool = False) -> list[Entry]:
    """A folder (its files, one level or ``recursive``) or one file."""
    path, location = spec.path, spec.text
    if path is not None:
        if path.is_dir():
            found = path.rglob("*") if recursive else path.iterdir()
            return [_local_entry(p) for p in sorted(found) if p.is_file()]
        if path.is_file():
            return [_local_entry(path)]
        raise InputError("no such file or folder", path=location, fix="check the path")
    if spec.protocol in _UNLISTABLE:
        return [Entry(location)]
    fs, path = filesystem(location, options)
    info = retrying(lambda: fs.info(path), location)   # FileNotFoundError: one line
    if info.get("type") != "directory":
        return [Entry(location, info.get("size"), info_identity(info))]
    if recursive:   # the file system already built for the info above
        return _files(fs, path, lambda fs, path: fs.find(path, detail=True), location)
    return _files(fs, path, lambda fs, path: fs.ls(path, detail=True), location)


def _asked(location: Location, options, ask) -> list[Entry]:
    """:func:`_files` of ``location`` on its file system."""
    fs, path = filesystem(location.text, options)
    return _files(fs, path, ask, location.text)


def _files(fs, path: str, ask, shown: str) -> list[Entry]:
    """The files among the infos the store answers ``ask(fs, path)`` with (a list or a dict;
    retried until the deadline), as entries."""
    items = retrying(lambda: ask(fs, path), shown)
    items = items.values() if isinstance(items, dict) else items
    return [_remote_entry(fs, i) for i in items if i.get("type", "file") == "file"]


def _remote_entry(fs, info: dict) -> Entry:
    return Entry(fs.unstrip_protocol(info["name"]), info.get("size"), info_identity(info))


def _named(locations: list[Location], options) -> list[Entry]:
    """Names taken as given (a brace list): checked by one listing per folder under the
    names' common prefix; on http(s), unchecked."""
    out, folders = [], {}
    for loc in locations:
        if loc.path is not None:
            if not loc.path.is_file():
                raise InputError("no such file", path=loc.text, fix="check the brace pattern")
            out.append(_local_entry(loc.path))
        elif loc.protocol in _UNLISTABLE:
            out.append(Entry(loc.text))
        else:
            folders.setdefault(loc.folder, []).append(loc)
    for folder, locs in folders.items():
        listed = {e.location: e for e in _listed(folder, os.path.commonprefix(
            [x.name for x in locs]), options)}
        for loc in locs:
            if loc.text not in listed:
                raise InputError("no such object", path=loc.shown,
                                 fix="check the brace pattern and the bucket")
            out.append(listed[loc.text])
    return out


def _listed(folder: Location, prefix: str, options) -> list[Entry]:
    """The files directly in ``folder`` whose names start with ``prefix``: a server-side
    prefix where the backend takes one (s3fs, gcsfs), else one listing of the folder."""
    def ask(fs, path):
        try:
            return fs.find(path, maxdepth=1, prefix=prefix, detail=True)
        except TypeError:   # a backend without server-side prefixes
            return fs.find(path, maxdepth=1, detail=True)
    return [e for e in _asked(folder, options, ask) if e.name.startswith(prefix)]


def _glob(pattern: Location, options) -> list[Entry]:
    path = pattern.path
    if path is not None:
        return [_local_entry(Path(p)) for p in sorted(globlib.glob(str(path)))
                if Path(p).is_file()]
    if pattern.protocol in _UNLISTABLE:
        raise InputError("an http(s) server cannot be listed, so a wildcard cannot be matched "
                         "there", path=pattern.shown, fix="name the files, e.g. with a "
                         "brace list: https://host/shard-{00000..00099}.tar")
    fixed = pattern.name_prefix
    if fixed is not None:
        return [e for e in _listed(pattern.folder, fixed, options)
                if fnmatch.fnmatchcase(e.name, pattern.name)]
    return _asked(pattern, options, lambda fs, path: fs.glob(path, detail=True))


def _normal(location: str) -> str:
    """``a/b/../c`` -> ``a/c`` in a path or a URL's path (a manifest's relative names)."""
    import posixpath

    if not is_url(location):
        return os.path.normpath(location)
    scheme, _, rest = location.partition("://")
    root, _, path = rest.partition("/")
    return f"{scheme}://{root}/{posixpath.normpath(path).lstrip('/')}"


def _from_manifest(spec: Spec, options) -> list[Entry]:
    """The files a manifest lists, one per line (relative to the manifest, or URLs)."""
    from capaudit.core.storage.fs import open_input

    with open_input(spec.text, options) as fh:
        lines = [ln.strip() for ln in fh.read().decode("utf-8").splitlines()]
    base = spec.folder.text
    locations = [locate(ln if is_url(ln) or os.path.isabs(ln) else _normal(join(base, ln)))
                 for ln in lines if ln and not ln.startswith("#")]
    if not locations:
        raise InputError("the manifest lists no file", path=spec.shown,
                         fix="one shard name or URL per line")
    return sorted(_named(locations, options), key=lambda e: e.location)


# -- a tree of files by location string (filter run --shards) ---------------------------
def _local(spec: Spec) -> list[str] | None:
    """The files of a local spec (None: ``spec`` is one file)."""
    text = spec.listed
    if "{" in text:
        paths = [p for n in spec.names
                 for p in (sorted(globlib.glob(n.text)) if n.globbed else [n.text])]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise InputError(f"{len(missing):,} shard(s) of the brace list are missing, "
                             f"the first {missing[0]}", path=text, fix="check --shards")
        return paths
    if spec.globbed:
        return sorted(globlib.glob(text, recursive=True))
    if os.path.isdir(text):
        return sorted(str(p) for p in Path(text).rglob("*") if p.is_file()
                      and not p.name.startswith("."))
    if os.path.isfile(text):
        return None
    raise InputError("no such shard folder, file, glob or brace list", path=text,
                     fix="check --shards")


def _remote(spec: Spec) -> tuple[list[Entry], bool]:
    """The entries of a URL spec, and whether it names one object (then its one entry, as
    listed: not asked for again). Listed with narrow prefixes; a folder recursively."""
    if not spec.literal:
        return _listed_spec(spec, None), False
    entries = _listed_spec(spec, None, recursive=True)
    if len(entries) == 1 and entries[0].location.rstrip("/") == spec.listed.rstrip("/"):
        return entries, True
    return [e for e in entries if not e.name.startswith(".")], False


def list_tree(spec: Spec) -> list[tuple[str, str, int | None, dict]]:
    """``(location, name relative to the listing's root, size, identity)`` of every file of
    one file, a folder (recursively, hidden names left out), a glob or a brace list (a spec
    read by :func:`~capaudit.core.storage.urls.parse_spec`); the identity (ETag, size,
    modification time) is what the store reported while listing (empty for a local file)."""
    if spec.path is None:      # a URL: object storage or a server
        entries, one_object = _remote(spec)
        if one_object:
            e = entries[0]
            return [(e.location, e.name, e.size, dict(e.identity))]
        root = spec.root.rstrip("/")
        return [(e.location, e.location[len(root):].lstrip("/") if e.location.startswith(
            root + "/") else e.name, e.size, dict(e.identity)) for e in entries]
    paths = _local(spec)
    if paths is None:
        one = spec.listed
        return [(one, os.path.basename(one), os.stat(one).st_size, {})]
    return [(p, os.path.relpath(p, spec.root), os.stat(p).st_size, {}) for p in paths
            if os.path.isfile(p)]
