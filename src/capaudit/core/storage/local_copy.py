"""A local path for a remote file: for the readers that need one (DuckDB's ``read_json``,
pyarrow's datasets, ``sets add``, ``annotations add``, a shard's details copied into the
store).

Why a copy and not a stream: those readers take a path, and ``sets add`` keeps every caption
in the store anyway (the copy costs the disk the store will hold). The copy is streamed
1 MB at a time (bounded memory) with retried reads (:func:`capaudit.core.storage.fs.open_input`)
into a private temporary folder, keeps the object's name (format sniffing sees its suffix)
and is removed after use.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Iterator

from capaudit.core.storage.fs import filesystem, retrying
from capaudit.core.storage.urls import local_path, name_of, protocol_of

__all__ = ["local_copy", "kept_copy", "named_by_url", "naming_url", "url_named"]


@contextlib.contextmanager
def local_copy(location, storage_options: dict | None = None) -> Iterator[Path]:
    """A local path holding ``location``: a local path as it is; a remote file (or every file
    under a remote folder) streamed 1 MB at a time into a private temporary folder, removed
    after the block. For the readers that need a path (DuckDB's ``read_json``, pyarrow's
    datasets); the copy keeps the object's name, so format sniffing sees its suffix."""
    path = local_path(location)
    if path is not None:
        yield path
        return
    import tempfile

    fs, root = filesystem(str(location), storage_options)
    folder = Path(tempfile.mkdtemp(prefix="capaudit-remote-"))
    try:
        target = folder / (name_of(location) or "object")
        info = {} if protocol_of(location) in ("http", "https") else \
            retrying(lambda: fs.info(root), location)
        is_dir = info.get("type") == "directory"
        files = sorted(retrying(lambda: fs.find(root), location)) if is_dir else [root]
        for name in files:   # one streamed GET each, retried whole
            dest = target / name[len(root.rstrip("/")) + 1:] if is_dir else target
            dest.parent.mkdir(parents=True, exist_ok=True)
            retrying(lambda: fs.get_file(name, str(dest)), fs.unstrip_protocol(name))
        yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_KEPT: dict = {}   # URL -> its local copy, for this process


def kept_copy(location, storage_options: dict | None = None) -> Path:
    """:func:`local_copy` of a remote file that lives until the process ends (a caption file
    given to ``audit run`` is read more than once: coverage, then the audit)."""
    if location not in _KEPT:
        import atexit

        ctx = local_copy(location, storage_options)
        _KEPT[location] = ctx.__enter__()
        atexit.register(ctx.__exit__, None, None, None)
    return _KEPT[location]


def named_by_url(exc: BaseException, copy: Path, url: str) -> None:
    """``exc`` (a capaudit error raised while a reader read ``copy``) made to name ``url``
    where it named the copy, in place: its class, row and fix kept. Why: a private
    temporary path tells the user nothing, and it is gone when the message is read."""
    old = str(copy)
    exc.args = tuple(a.replace(old, url) if isinstance(a, str) else a for a in exc.args)
    for attr in ("path", "fix"):
        value = getattr(exc, attr, None)
        if value is not None and old in str(value):
            setattr(exc, attr, str(value).replace(old, url))


@contextlib.contextmanager
def naming_url(copy: Path, url: str) -> Iterator[None]:
    """A block whose capaudit errors name ``url``, never ``copy`` (:func:`named_by_url`)."""
    from capaudit.errors import CapauditError

    try:
        yield
    except CapauditError as exc:
        named_by_url(exc, copy, url)
        raise


def url_named(make, copy: Path, url: str):
    """``make`` (a callable giving an iterator that reads ``copy``) whose capaudit errors
    name ``url`` (:func:`named_by_url`): a kept copy is read lazily, after the call that
    made it returned; what ``make`` keeps as its ``reader`` is kept too."""
    def reading():
        with naming_url(copy, url):
            yield from make()
    reading.reader = getattr(make, "reader", None)
    return reading
