"""The one I/O layer: a URL or a local path -> (file system, path), streamed reads, retries.

Why one layer: pretraining corpora sit in object storage (img2dataset writes to S3,
DataComp and LAION metadata are on the Hugging Face Hub) and a Ray cluster's nodes share no
disk, so every reader, writer, marker and work folder names its data by a URL or a path
and goes through here. The API, from the bottom up:

- :func:`filesystem` ``(url) -> (fs, path)``: fsspec's ``url_to_fs`` for ``s3://`` (s3fs),
  ``gs://`` (gcsfs), ``hf://`` (huggingface_hub's ``HfFileSystem``), ``http(s)://``
  (read-only); a missing backend is named with its extra (``pip install 'capaudit[s3]'``).
  Credentials and endpoints come from each file system's own sources (``AWS_ENDPOINT_URL``,
  ``AWS_PROFILE``, fsspec's ``FSSPEC_S3_*`` configuration, ``HF_TOKEN``), never from a
  capaudit option; they never reach a message (:func:`capaudit.core.redact.redact`).
- :func:`open_input`: a binary file read in blocks (bounded memory, never the whole object),
  whose reads are retried with backoff after a transient fault (a reset connection, a 503,
  a throttle) until a deadline (``CAPAUDIT_IO_DEADLINE_S``, 300 s) and resumed at the same
  offset; Ctrl-C ends a wait at once (fsspec's ``sync`` waits in 1 s slices).
- :func:`identity`: what a completion marker keeps of a remote input (size, ETag or
  checksum, modification time): an object rewritten under the same name is redone.
- :func:`capaudit.core.storage.local_copy.local_copy`: a remote file streamed to a private
  temporary file for the readers that need a path (DuckDB's ``read_json``, ``sets add``).

Listing (brace lists, narrow prefixes, manifests) is :mod:`capaudit.core.storage.listing`; atomic
writes and markers' conditional create are :mod:`capaudit.core.storage.remote_write`; a work or
output folder named by a URL is :class:`capaudit.core.storage.folder.Folder`. fsspec is imported
only when a URL is used: a local run never pays for it.

A sharded command on this layer (what ``audit run --shards`` and ``enrich`` do; a sharded
filter does the same), every location a path or a URL::

    from capaudit.core.storage.folder import Folder
    from capaudit.core.storage.listing import list_files
    from capaudit.core.storage.fs import open_input
    from capaudit.io.markers import input_fingerprint, read_marker, same_input, write_marker

    shards = list_files("s3://b/in/shard-{00000..00099}.tar")   # Entry: location, size, identity
    work = Folder("s3://b/run").sub(config_hash)                # the work folder, as a URL
    # in a task (give it e.location, work.location and plain options; never a file system):
    marker = read_marker(work, e.name)
    fp = input_fingerprint(e.location, (marker or {}).get("input"), known=e.identity)
    if marker and same_input(marker["input"], fp): ...          # done: skip
    with open_input(e.location) as src, work.open_write(out_name) as dst:
        ...                                                     # streamed in, whole-or-nothing out
    write_marker(work, e.name, config_hash, {"input": fp, ...})  # after the output, if absent

and :func:`capaudit.core.storage.work_folder.work_dir_lock` holds the work folder (a lock object on
object storage), :func:`capaudit.executors.base.require_shared` refuses a local work folder
on a Ray cluster of several nodes, :func:`capaudit.core.storage.folder.staged` builds a folder output
locally and uploads it.
"""

from __future__ import annotations

import contextlib
import errno
import io
import random
import time
from typing import Callable, TypeVar

from capaudit.core.storage.urls import BACKENDS, local_path, protocol_of, shown_url
from capaudit.errors import AccessRefused, InputError, StoreFault, require

__all__ = ["filesystem", "open_input", "identity", "info_identity", "retrying",
           "io_error", "is_transient", "is_refused", "is_missing", "DEADLINE_ENV"]

T = TypeVar("T")
DEADLINE_ENV, DEFAULT_DEADLINE_S = "CAPAUDIT_IO_DEADLINE_S", 300.0
_TRANSIENT_ERRNOS = {errno.ECONNRESET, errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EPIPE,
                     errno.EAGAIN, errno.ECONNABORTED, errno.EHOSTUNREACH, errno.ENETUNREACH,
                     errno.ENETDOWN}
_TRANSIENT_NAMES = {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                    "ConnectionClosedError", "ClientConnectorError", "ServerDisconnectedError",
                    "ClientPayloadError", "ClientOSError", "ServerTimeoutError",
                    "FSTimeoutError", "IncompleteRead", "ResponseStreamingError"}
_TRANSIENT_WORDS = ("SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout",
                    "Throttl", "TooManyRequests", "Service Unavailable", "Bad Gateway",
                    "Gateway Timeout", "rate limit")
_NOT_TRANSIENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
                  FileExistsError, ValueError, TypeError)


def filesystem(url: str, storage_options: dict | None = None):
    """``(fs, path)`` of a URL: the backend's file system (built here, in this process: a
    Ray task builds its own from the URL, never receiving one with its credentials)."""
    proto = protocol_of(url)
    module, extra = BACKENDS.get(proto, ("fsspec", "http"))
    require("fsspec", extra, f"{proto}:// paths")
    require(module, extra, f"{proto}:// paths")
    import fsspec.core

    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ValueError, ImportError) as exc:
        raise InputError(f"cannot open this location ({' '.join(str(exc).split())[:160]})",
                         path=shown_url(url), fix="check the URL") from None


def _deadline() -> float:
    from capaudit.core.ranges import env_number

    return env_number(DEADLINE_ENV, DEFAULT_DEADLINE_S, 0.0, 86_400.0)


def is_transient(exc: BaseException) -> bool:
    """A fault that a retry may cure (a reset connection, a timeout, HTTP 429/5xx, a
    throttle), judged from the error and what caused it; a missing object, a refusal or a
    bad argument is not."""
    for e in (exc, exc.__cause__, exc.__context__):
        if e is None or isinstance(e, _NOT_TRANSIENT):
            continue
        if isinstance(e, (ConnectionError, TimeoutError)) or type(e).__name__ in _TRANSIENT_NAMES:
            return True
        status = getattr(e, "status", None) or getattr(e, "status_code", None)
        if isinstance(status, int) and (status == 429 or 500 <= status <= 599):
            return True
        if isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS:
            return True
        if isinstance(e, OSError) and any(w in str(e) for w in _TRANSIENT_WORDS):
            return True
    return False


def _status(exc: BaseException) -> int | None:
    """The HTTP status an error (or what caused it) carries, if any: fsspec's http file
    system reports a 403 or a 503 on ``info`` as a ``FileNotFoundError`` caused by it."""
    for e in (exc, exc.__cause__, exc.__context__):
        status = None if e is None else getattr(e, "status", None) or getattr(
            e, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def is_refused(exc: BaseException) -> bool:
    """The store refused access (HTTP 401/403, S3 AccessDenied, no credentials): not a
    missing object, and no retry cures it. A ``FileNotFoundError`` holds the user's own
    path (``/Forbidden/x`` is a name): only its status can say it was refused."""
    if _status(exc) in (401, 403) or isinstance(exc, PermissionError) \
            or type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return True
    if isinstance(exc, FileNotFoundError):
        return False
    text = " ".join(str(e) for e in (exc, exc.__cause__) if e is not None)
    return any(w in text for w in ("AccessDenied", "Forbidden", "InvalidAccessKeyId",
                                   "SignatureDoesNotMatch"))


def is_missing(exc: BaseException) -> bool:
    """A ``FileNotFoundError`` that means the object is not there (not a refusal or a
    server fault that a backend reported as one)."""
    return isinstance(exc, FileNotFoundError) and not is_refused(exc) \
        and not is_transient(exc)


def io_error(exc: BaseException, url, what: str = "read") -> InputError:
    """A storage fault as one line naming the location (credentials masked) and the fix:
    a refusal, a missing object and a store that did not answer each say so."""
    name, text = type(exc).__name__, " ".join(str(exc).split())[:200]
    if is_refused(exc):
        status = _status(exc)
        refused = AccessRefused(
            f"cannot {what} here: access refused "
            f"({f'HTTP {status}' if status else name}: denied, or no credentials)",
            path=shown_url(url), fix="check the credentials of this store (AWS_PROFILE / "
            "AWS_ACCESS_KEY_ID, GOOGLE_APPLICATION_CREDENTIALS, HF_TOKEN) and its endpoint "
            "(AWS_ENDPOINT_URL)")
        refused.status = status   # None: S3's 403, which a missing key also gets (no List)
        return refused
    if is_transient(exc):
        said = f"HTTP {_status(exc)}" if _status(exc) else f"{name}: {shown_url(text)}"
        return StoreFault(f"the store did not answer within {_deadline():g} s ({said})",
                          path=shown_url(url),
                          fix=f"check the network and the endpoint, or raise {DEADLINE_ENV}")
    if isinstance(exc, FileNotFoundError):
        return InputError("no such file or object", path=shown_url(url), fix="check the path")
    return InputError(f"cannot {what} ({name}: {shown_url(text)})", path=shown_url(url),
                      fix="check the path and the store")


def retrying(call: Callable[[], T], url, what: str = "read") -> T:
    """``call()``, retried with exponential backoff (0.2 s doubling to 10 s, jittered) while
    it fails with a transient fault and the deadline has not passed; any other fault, or
    the last one, is one line (:func:`io_error`). Ctrl-C is never caught."""
    start, delay = time.monotonic(), 0.2
    while True:
        try:
            return call()
        except (InputError, FileExistsError):   # an exclusive write's answer: the caller's
            raise
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() - start + delay > _deadline():
                raise io_error(exc, url, what) from None
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 10.0)


class _RetryingFile(io.RawIOBase):
    """A remote file read in blocks whose faults are retried at the same offset: the file
    is reopened where the failed read started (pyarrow, tarfile and the JSON readers see
    one unbroken file)."""

    def __init__(self, url: str, storage_options: dict | None, block_size: int | None):
        self.url, self._pos = url, 0
        self._open = lambda: _fs_open(url, storage_options, block_size)
        self._f = retrying(self._open, url)
        self.size = getattr(self._f, "size", None)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self.size if self.size is not None else 0}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _reopened(self):
        with contextlib.suppress(Exception):
            self._f.close()
        self._f = self._open()
        return self._f

    def read(self, n: int = -1) -> bytes:
        tries = []

        def attempt():
            f = self._reopened() if tries else self._f
            tries.append(1)
            if f.tell() != self._pos:
                f.seek(self._pos)
            return f.read(n)
        data = retrying(attempt, self.url)
        self._pos += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self.read(-1)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._f.close()
        super().close()


def _fs_open(url: str, storage_options: dict | None, block_size: int | None):
    fs, path = filesystem(url, storage_options)
    kwargs = {"block_size": block_size} if block_size else {}
    return fs.open(path, "rb", **kwargs)


def open_input(location, storage_options: dict | None = None, *,
               block_size: int | None = None):
    """A binary file of ``location`` (path or URL) for reading: local files as they are,
    remote ones read in blocks (``block_size``: the backend's default, 5 MB on S3) with
    retried reads, behind a 1 MB buffer (a tar's 512-byte headers cost no request and no
    retry wrapper each)."""
    path = local_path(location)
    if path is not None:
        try:
            return open(path, "rb")
        except OSError as exc:
            raise io_error(exc, path) from None
    return io.BufferedReader(_RetryingFile(str(location), storage_options, block_size),
                             buffer_size=1 << 20)


_ID_KEYS = ("ETag", "etag", "md5Hash", "crc32c", "checksum", "sha256", "oid", "blob_id",
            "LastModified", "last_modified", "mtime", "updated", "generation", "VersionId")


def identity(location, storage_options: dict | None = None) -> dict:
    """What names a remote object's content without reading it: its size and whatever of
    ETag, checksums, version and modification time the store reports (JSON-able)."""
    fs, path = filesystem(str(location), storage_options)
    info = retrying(lambda: fs.info(path), location)
    return info_identity(info)


def info_identity(info: dict) -> dict:
    """:func:`identity` of an ``fs.info``/listing entry."""
    out = {"size": info.get("size")}
    for key in _ID_KEYS:
        value = info.get(key)
        if value is not None:
            out[key.lower()] = str(value).strip('"')
    lfs = info.get("lfs")
    if isinstance(lfs, dict) and lfs.get("sha256"):
        out["sha256"] = str(lfs["sha256"])
    return out
