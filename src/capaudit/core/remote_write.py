"""Writes to object storage: an object appears whole or not at all; a marker only if absent.

Why not the local recipe (temporary name, then rename): on object storage a rename is a copy
and a delete, and a reader may list the temporary key. And the obvious code is wrong: a
``with fs.open(url, "wb")`` block that raises still *closes* the file, which completes the
upload and publishes a truncated object (fsspec/s3fs #154; the same in pyarrow and
smart_open). So :func:`open_output` opens with ``autocommit=False`` (a multipart upload on
S3, a resumable one on GCS), commits only when the block ends cleanly, and discards the
upload on any error or Ctrl-C (the discard waits at most a second; the store drops an
unfinished upload by its lifecycle rule otherwise). ``exclusive`` creates the object only
if it does not exist (S3's ``If-None-Match: *``, fsspec's ``"x"`` mode): how completion
markers and the work folder's lock are created; a backend without conditional writes gets a
plain write.

http(s) and ``hf://`` are refused as outputs with one line: a web server cannot be written,
and the Hub rate-limits commits (write to a local folder and upload it once).
"""

from __future__ import annotations

import contextlib
import threading
from typing import BinaryIO, Iterator

from capaudit.core.storage import filesystem, io_error, retrying
from capaudit.core.urls import READ_ONLY, protocol_of, shown_url
from capaudit.errors import InputError

__all__ = ["open_output", "write_object", "remove_object", "check_writable", "Exists"]


class Exists(FileExistsError):
    """An exclusive write found the object there already."""


def check_writable(url: str) -> str:
    """``url`` when capaudit may write an object there, else one line saying why not."""
    why = READ_ONLY.get(protocol_of(url))
    if why:
        raise InputError(f"cannot write here: {why}", path=shown_url(url),
                         fix="write to a local path, s3:// or gs://")
    if str(url).endswith("/"):
        raise InputError("not a file name (it ends with '/')", path=shown_url(url),
                         fix="give a file name, e.g. s3://bucket/out.json")
    return url


def _bounded(call, seconds: float = 1.0) -> None:
    """Run ``call`` (a discard) in a daemon thread for at most ``seconds``: Ctrl-C's exit
    never waits on an unreachable store."""
    t = threading.Thread(target=_quiet, args=(call,), daemon=True)
    t.start()
    t.join(seconds)


def _quiet(call) -> None:
    with contextlib.suppress(Exception):
        call()


def _open(fs, path: str, exclusive: bool):
    if exclusive:
        try:
            return fs.open(path, "xb", autocommit=False)
        except (ValueError, NotImplementedError, TypeError):
            pass   # no conditional create here: a plain write
    return fs.open(path, "wb", autocommit=False)


@contextlib.contextmanager
def open_output(url: str, *, exclusive: bool = False,
                storage_options: dict | None = None) -> Iterator[BinaryIO]:
    """A binary file whose content becomes the object ``url`` only when the block ends
    cleanly; on an error (or Ctrl-C) the upload is discarded and nothing appears.
    ``exclusive``: :class:`Exists` if the object is there (checked at the commit)."""
    check_writable(url)
    fs, path = filesystem(url, storage_options)
    f = retrying(lambda: _open(fs, path, exclusive), url, "write")
    try:
        yield f
        f.close()        # uploads the last part; nothing is published yet
        f.commit()
    except BaseException as exc:
        _bounded(f.discard)
        f.closed = True   # never closed later (by the garbage collector): that would upload
        if isinstance(exc, FileExistsError):
            raise Exists(str(exc)) from None
        if isinstance(exc, OSError):
            raise io_error(exc, url, "write") from None
        raise
    finally:
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)


def write_object(url: str, data: bytes, *, exclusive: bool = False,
                 storage_options: dict | None = None) -> None:
    """``data`` as the object ``url``, whole or not at all (:func:`open_output`)."""
    with open_output(url, exclusive=exclusive, storage_options=storage_options) as fh:
        fh.write(data)


def remove_object(url: str, storage_options: dict | None = None, *,
                  recursive: bool = False) -> None:
    """Delete ``url`` (every object under it with ``recursive``); absent is fine."""
    check_writable(url.rstrip("/") or url)
    fs, path = filesystem(url, storage_options)
    try:
        retrying(lambda: fs.rm(path, recursive=recursive), url, "delete")
    except InputError as exc:
        if "no such file" not in str(exc):
            raise
