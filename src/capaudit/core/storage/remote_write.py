"""Writes to object storage: an object appears whole or not at all; a marker only if absent.

Why not the local recipe (temporary name, then rename): on object storage a rename is a copy
and a delete, and a reader may list the temporary key. And the obvious code is wrong: a
``with fs.open(url, "wb")`` block that raises still *closes* the file, which completes the
upload and publishes a truncated object (fsspec/s3fs #154; the same in pyarrow and
smart_open). So :func:`open_output` holds the first :data:`SPOOL_BYTES` in memory and, if
the block ends cleanly, sends them as one PUT (which the store takes whole or not at all);
past that it streams through a file opened with ``autocommit=False`` (a multipart upload
on S3, a resumable one on GCS), committed only when the block ends cleanly and discarded
on any error or Ctrl-C (the discard waits at most a second; the store drops an unfinished
upload by its lifecycle rule otherwise). Memory stays bounded by the spool and a part. ``exclusive`` creates the object only
if it does not exist (S3's ``If-None-Match: *``, fsspec's ``"x"`` mode): how completion
markers and the work folder's lock are created; a backend without conditional writes gets a
plain write.

http(s) and ``hf://`` are refused as outputs with one line: a web server cannot be written,
and the Hub rate-limits commits (write to a local folder and upload it once).
"""

from __future__ import annotations

import contextlib
import io
import threading
from typing import BinaryIO, Iterator

from capaudit.core.storage.fs import filesystem, io_error, retrying
from capaudit.core.storage.urls import READ_ONLY, protocol_of, shown_url
from capaudit.errors import InputError

__all__ = ["open_output", "write_object", "remove_object", "check_writable", "Exists",
           "SPOOL_BYTES"]

SPOOL_BYTES = 5 * 2 ** 20     # objects up to this size: one PUT, no multipart upload


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


class _Spool(io.RawIOBase):
    """A write-only file: the first :data:`SPOOL_BYTES` in memory, then a multipart upload
    (``autocommit=False``); :meth:`commit` publishes, :meth:`discard` drops."""

    def __init__(self, fs, path: str, url: str, exclusive: bool):
        self.fs, self.path, self.url, self.exclusive = fs, path, url, exclusive
        self.buf, self.f, self.pos = io.BytesIO(), None, 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def write(self, data) -> int:
        n = len(data)
        if self.f is None:
            self.buf.write(data)
            if self.buf.tell() > SPOOL_BYTES:   # too big for one PUT in memory: stream it
                self.f = retrying(lambda: _open(self.fs, self.path, self.exclusive), self.url,
                                  "write")
                self.f.write(self.buf.getvalue())
                self.buf = None
        else:
            self.f.write(data)
        self.pos += n
        return n

    def commit(self) -> None:
        if self.f is not None:
            self.f.close()        # uploads the last part; nothing is published yet
            self.f.commit()
            return
        data = self.buf.getvalue()
        retrying(lambda: _put(self.fs, self.path, data, self.exclusive), self.url, "write")

    def discard(self) -> None:
        if self.f is not None:
            _bounded(self.f.discard)
            self.f.closed = True   # never closed later (by the garbage collector): that uploads
        self.buf = None


def _put(fs, path: str, data: bytes, exclusive: bool) -> None:
    """One PUT (whole or nothing); ``exclusive``: only if absent, where the store can."""
    if exclusive:
        try:
            fs.pipe_file(path, data, mode="create")
            return
        except (TypeError, NotImplementedError, ValueError):
            pass
    fs.pipe_file(path, data)


@contextlib.contextmanager
def open_output(url: str, *, exclusive: bool = False,
                storage_options: dict | None = None) -> Iterator[BinaryIO]:
    """A binary file whose content becomes the object ``url`` only when the block ends
    cleanly; on an error (or Ctrl-C) the upload is discarded and nothing appears.
    ``exclusive``: :class:`Exists` if the object is there (checked at the commit)."""
    check_writable(url)
    fs, path = filesystem(url, storage_options)
    spool = _Spool(fs, path, url, exclusive)
    try:
        yield spool
        spool.commit()
    except BaseException as exc:
        spool.discard()
        if isinstance(exc, FileExistsError) or isinstance(exc.__cause__, FileExistsError):
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
        if recursive:
            retrying(lambda: fs.rm(path, recursive=True), url, "delete")
        else:
            retrying(lambda: fs.rm_file(path), url, "delete")
    except InputError as exc:
        if "no such file" not in str(exc):
            raise
