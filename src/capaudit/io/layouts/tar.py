"""Webdataset tars: the layout's one reader and one writer.

Reading: :class:`TarReader` walks one tar member by member, whoever reads it: ``sets add``
(:class:`~capaudit.io.readers.webdataset.WebDatasetReader`), ``audit run --shards``
(:mod:`capaudit.io.caption_shards`), image shards (:mod:`capaudit.io.image_shards`), all
through :func:`iter_samples` (``(key, {extension: bytes})``), and ``filter run --shards`` /
``sets export --to original`` (:class:`~capaudit.io.rewrite.tar.TarRewriter`, which needs every
member with its header to write it back). Two ways in: a file opened by path (or a seekable
remote reader) read with random access, or a forward-only stream (``r|*``: the hashing reader
of a shard), whose end is found by remembering its last bytes. Either way the tar must be whole:
a member cut short, an unreadable header or a missing end-of-archive marker raise one
:class:`InputError` naming the file, and a member over its cap (:func:`member_limits`) is
refused before a byte of it is read.

Writing: :func:`open_writer` and :func:`add_file`: ``sets export --to webdataset`` writes
tarfile's default format (PAX), image shards USTAR (``shards build``: byte-identical reruns),
the rewriter PAX as a stream; a member's header is tarfile's default (mtime 0, mode 0o644)
unless a source member's header is copied.
"""

from __future__ import annotations

import io
import json
import tarfile
import zlib
from pathlib import Path
from typing import IO, Iterator

from capaudit.core.ranges import env_number
from capaudit.errors import InputError

__all__ = ["TarReader", "iter_samples", "sample_key", "member_limits", "declared_count",
           "open_writer", "add_file", "IMAGE_EXTS", "USTAR", "PAX"]

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp", "bmp")
TEXT_LIMIT_ENV, IMAGE_LIMIT_ENV = "CAPAUDIT_TAR_TEXT_LIMIT_MB", "CAPAUDIT_TAR_IMAGE_LIMIT_MB"
DEFAULT_TEXT_LIMIT_MB, DEFAULT_IMAGE_LIMIT_MB = 4, 128
USTAR, PAX = tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT
REBUILD = "rebuild or re-download the shard"
ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error)
_TAIL = 1 << 16


def member_limits() -> tuple[int, int]:
    """(caption/JSON cap, image cap) in bytes: a 1.5 GB sparse member is never read."""
    caps = []
    for env, default in ((TEXT_LIMIT_ENV, DEFAULT_TEXT_LIMIT_MB),
                         (IMAGE_LIMIT_ENV, DEFAULT_IMAGE_LIMIT_MB)):
        # a size in MB: 1 byte to 1 TB (inf or nan would overflow int())
        caps.append(int(env_number(env, float(default), 1e-6, 1e6) * 1_000_000))
    return caps[0], caps[1]


def sample_key(member: tarfile.TarInfo) -> str | None:
    """The sample a member belongs to (its name without extensions, folder kept); None for a
    member that is no sample's file (a folder, a name without an extension)."""
    name = member.name.rsplit("/", 1)[-1]
    if not member.isfile() or "." not in name:
        return None
    return member.name[:len(member.name) - len(name)] + name.split(".", 1)[0]


class _Tail:
    """A read-only stream that remembers how much was read and its last bytes (to find the
    end-of-archive marker after ``tarfile``'s stream mode stops)."""

    def __init__(self, fh):
        self.fh, self.total, self.tail = fh, 0, bytearray()

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.total += len(data)
        self.tail += data
        if len(self.tail) > 2 * _TAIL:
            del self.tail[:-_TAIL]
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


class TarReader:
    """One tar, member by member: iterate it for its headers (the end-of-archive check runs
    when the members run out), :meth:`read` a file member's bytes before the next.

    ``fileobj``: the tar already open (``path`` then only names it); ``stream``: read it
    forward only (``fileobj`` need not seek)."""

    def __init__(self, path, fileobj: IO[bytes] | None = None, *, stream: bool = False):
        self.path, self.n, self.stream = path, 0, stream
        self.caps = member_limits()
        self.src = _Tail(fileobj) if stream else None
        try:
            self.tf = tarfile.open(fileobj=self.src, mode="r|*") if stream else \
                tarfile.open(path, "r") if fileobj is None else \
                tarfile.open(fileobj=fileobj, mode="r")
        except ERRORS as exc:
            raise InputError(f"not a readable tar shard ({exc})", path=path,
                             fix=REBUILD if stream else None) from None

    def __iter__(self) -> Iterator[tarfile.TarInfo]:
        with self.tf:
            while True:
                try:
                    member = self.tf.next()
                except ERRORS as exc:
                    raise self._broken(f"truncated or corrupt tar after {self.n} members "
                                       f"({exc})") from None
                if member is None:
                    break
                self.n += 1
                yield member
            self._check_end()

    def read(self, member: tarfile.TarInfo) -> bytes:
        """A file member's bytes, whole: refused over its cap, cut short or unreadable."""
        is_image = member.name.rsplit(".", 1)[-1].lower() in IMAGE_EXTS
        cap, env = (self.caps[1], IMAGE_LIMIT_ENV) if is_image else \
            (self.caps[0], TEXT_LIMIT_ENV)
        if member.size > cap:
            raise InputError(f"member '{member.name}' is {member.size} bytes, over the "
                             f"{cap / 1e6:g} MB limit for "
                             f"{'image' if is_image else 'caption/JSON'} members",
                             path=self.path, fix=f"check the shard, or raise the limit with "
                                                 f"{env}=MB")
        try:
            data = self.tf.extractfile(member).read()
        except ERRORS as exc:
            raise self._broken(f"truncated or corrupt tar: member '{member.name}' cannot be "
                               f"read whole ({exc})") from None
        if len(data) != member.size:
            raise self._broken(f"truncated tar: member '{member.name}' is cut short "
                               f"({len(data)} of {member.size} bytes)")
        return data

    def _broken(self, why: str) -> InputError:
        return InputError(why, path=self.path, fix=REBUILD)

    def _check_end(self) -> None:
        """The end-of-archive marker (two zero blocks) must follow the last member:
        ``tarfile`` stops silently at a cut or an unreadable header once past the first
        member; only the marker tells a whole tar from a cut one."""
        block, offset = tarfile.BLOCKSIZE, self.tf.offset
        try:
            if self.stream:
                self.src.drain()
                start = max(offset - (self.src.total - len(self.src.tail)), 0)
                end = bytes(self.src.tail[start:start + 2 * block])
                ends_at = self.src.total
            else:
                self.tf.fileobj.seek(offset)
                end = self.tf.fileobj.read(2 * block)
                ends_at = offset + len(end)
        except ERRORS as exc:
            raise self._broken(f"truncated or corrupt tar after {self.n} members "
                               f"({exc})") from None
        if len(end) == 2 * block and not end.strip(b"\0"):
            return
        if end[:block].strip(b"\0") and (self.stream or len(end) >= block):
            raise self._broken(f"corrupt tar: unreadable header at byte {offset} after "
                               f"{self.n} members")
        raise self._broken(f"truncated tar: no end-of-archive marker after {self.n} members "
                           f"(the file ends at byte {ends_at})")


def iter_samples(tar_path, fileobj=None) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Yield (key, {extension: bytes}) per sample, in tar order (``fileobj``: the tar opened
    by :func:`capaudit.core.storage.paths.readable`, ``tar_path`` then only names it; None or
    a path: ``tar_path`` is opened here).

    The tar must be whole (:class:`TarReader`), and hold no fewer samples than the shard's
    index declares (a tar cut at a member boundary otherwise reads as a complete, shorter
    one); a second member of a name is refused, never read over the first (tar keeps both;
    extraction keeps one).
    """
    fileobj = None if isinstance(fileobj, (str, Path)) else fileobj
    reader = TarReader(tar_path, fileobj)
    current, files, n_samples = None, {}, 0
    seen: set[str] = set()
    for member in reader:
        name = member.name.rsplit("/", 1)[-1]
        if not member.isfile() or "." not in name:   # as sample_key, its name split once
            continue
        if member.name in seen:
            raise InputError(f"member '{member.name}' appears twice in the tar: which one "
                             "holds the sample is not known", path=tar_path,
                             fix="rebuild the shard with one member per name")
        seen.add(member.name)
        stem, ext = name.split(".", 1)
        key = member.name[:len(member.name) - len(name)] + stem
        if current is not None and key != current:
            n_samples += 1
            yield current, files
            files = {}
        current = key
        files[ext] = reader.read(member)
    if current is not None:
        n_samples += 1
    if fileobj is None:   # an index beside a remote tar is not looked for
        _check_count(tar_path, n_samples)
    if current is not None:
        yield current, files


def declared_count(tar_path: Path) -> tuple[int, Path] | None:
    """Samples the shard declares beside its tar: capaudit's parquet index or img2dataset stats."""
    index = tar_path.with_suffix(".parquet")
    if index.is_file():
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(index)
            if {"key", "n_captions", "image_sha256"} <= set(meta.schema.names):
                return meta.num_rows, index
        except (OSError, pa.ArrowException):
            pass  # not capaudit's index (img2dataset writes one row per URL tried)
    stats = tar_path.with_name(tar_path.stem + "_stats.json")
    if stats.is_file():
        try:
            n = json.loads(stats.read_text(encoding="utf-8")).get("successes")
        except (OSError, ValueError, AttributeError):
            n = None
        if isinstance(n, int) and not isinstance(n, bool):
            return n, stats
    return None


def _check_count(tar_path: Path, n_samples: int) -> None:
    declared = declared_count(tar_path)
    if declared is not None and declared[0] != n_samples:
        raise InputError(f"the tar holds {n_samples} samples but {declared[1].name} declares "
                         f"{declared[0]}", path=tar_path,
                         fix="rebuild the shard (or remove a stale index beside it)")


def open_writer(target, fmt: int = tarfile.DEFAULT_FORMAT, *,
                stream: bool = False) -> tarfile.TarFile:
    """A tar to write: ``target`` a path or an open binary file; ``stream``: written forward
    only (``w|``); ``fmt``: tarfile's format (default PAX, :data:`USTAR` for image shards)."""
    mode = "w|" if stream else "w"
    if isinstance(target, (str, Path)):
        return tarfile.open(target, mode, format=fmt)
    return tarfile.open(fileobj=target, mode=mode, format=fmt)


def add_file(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    """A file member ``name`` holding ``data``, tarfile's default header (mtime 0, mode
    0o644, no owner): the same bytes on every rerun."""
    member = tarfile.TarInfo(name)
    member.size = len(data)
    tf.addfile(member, io.BytesIO(data))
