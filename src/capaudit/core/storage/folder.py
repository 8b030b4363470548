"""A folder named by a local path or a URL: what a work folder, a marker folder or a
sharded output is, whatever store holds it.

Why one class: a shard's state, its details, its marker and the run's lock are written by
whichever node ran the shard and read back by the driver, so on a cluster without a shared
disk the work folder is a URL (``s3://bucket/run/``). Code that writes a shard's outputs
asks a :class:`Folder` by *name* (``folder.write_bytes("shard-0.state.npz", data)``) and
never builds a path itself, so the same code keeps the promises on either store:

- local: the one writer's rules (:mod:`capaudit.core.safe_write`: our own temporary file,
  created exclusively, never through a link, renamed into place); an exclusive write is a
  hard link of the finished temporary file, which fails if the name exists;
- remote: an object appears whole or not at all, a marker only if absent
  (:mod:`capaudit.core.storage.remote_write`); listings are read fresh (fsspec caches listings per
  process, and a Ray worker on another node wrote what the driver now looks for).

A Ray task is given ``folder.location`` (a string) and ``folder.options`` (a dict without
secrets) and builds its own :class:`Folder`: no file system object, with its credentials,
is ever pickled.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from capaudit.core.storage.urls import is_url, join, local_path, shown_url

__all__ = ["Folder", "staged"]


class Folder:
    """A folder by location (path or URL) and storage options (no credentials)."""

    def __init__(self, location, storage_options: dict | None = None):
        if isinstance(location, Folder):
            storage_options = {**location.options, **(storage_options or {})}
            location = location.location
        text = str(location)
        self.location = text.rstrip("/") if is_url(text) and not text.endswith(":///") else text
        self.options = dict(storage_options or {})
        self.local = local_path(self.location)

    def __repr__(self) -> str:
        return f"Folder({shown_url(self.location)!r})"

    def __str__(self) -> str:
        return shown_url(self.location)

    def url(self, name: str) -> str:
        """The location of ``name`` in this folder."""
        return join(self.location, name)

    def sub(self, name: str) -> "Folder":
        return Folder(self.url(name), self.options)

    def _fs(self, name: str = ""):
        from capaudit.core.storage.fs import filesystem

        fs, path = filesystem(self.url(name) if name else self.location, self.options)
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)
        return fs, path

    def make(self) -> "Folder":
        """Create it (local: ``mkdir -p``; object storage has no folders to make)."""
        if self.local is not None:
            from capaudit.core.safe_write import make_dirs

            make_dirs(self.local)
        return self

    def read_bytes(self, name: str) -> bytes | None:
        """The bytes of ``name``; None when it is not there."""
        if self.local is not None:
            try:
                with open(self.local / name, "rb") as fh:
                    return fh.read()
            except FileNotFoundError:
                return None
        from capaudit.core.storage.fs import retrying

        fs, path = self._fs(name)
        return retrying(lambda: _or_none(lambda: fs.cat_file(path)), self.url(name))

    def write_bytes(self, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """``data`` as ``name``, whole or not at all; ``exclusive``: only if ``name`` is
        absent (:class:`~capaudit.core.storage.remote_write.Exists` otherwise)."""
        with self.open_write(name, exclusive=exclusive) as fh:
            fh.write(data)

    @contextlib.contextmanager
    def open_write(self, name: str, *, exclusive: bool = False) -> Iterator[BinaryIO]:
        """A binary file that becomes ``name`` only when the block ends cleanly."""
        if self.local is None:
            from capaudit.core.storage.remote_write import open_output

            with open_output(self.url(name), exclusive=exclusive,
                             storage_options=self.options) as fh:
                yield fh
            return
        from capaudit.core.safe_write import atomic_open

        if not exclusive:
            with atomic_open(self.local / name, "wb") as fh:
                yield fh
            return
        with _exclusive_local(self.local / name) as fh:
            yield fh

    def open_read(self, name: str):
        from capaudit.core.storage.fs import open_input

        return open_input(self.url(name), self.options)

    def size(self, name: str) -> int | None:
        """The size of ``name`` in bytes; None when it is not there."""
        if self.local is not None:
            p = self.local / name
            return p.stat().st_size if p.is_file() and not p.is_symlink() else None
        from capaudit.core.storage.fs import retrying

        fs, path = self._fs(name)
        info = retrying(lambda: _or_none(lambda: fs.info(path)), self.url(name))
        return None if info is None or info.get("type") == "directory" else info.get("size")

    def exists(self, name: str) -> bool:
        return self.size(name) is not None

    def names(self) -> list[str]:
        """The files directly in this folder, sorted (none when it does not exist)."""
        if self.local is not None:
            if not self.local.is_dir():
                return []
            return sorted(p.name for p in self.local.iterdir() if p.is_file())
        from capaudit.core.storage.fs import retrying

        fs, path = self._fs()
        try:
            items = retrying(lambda: fs.ls(path, detail=True), self.location)
        except Exception:   # an absent prefix
            return []
        return sorted(i["name"].rstrip("/").rsplit("/", 1)[-1] for i in items
                      if i.get("type") == "file")

    def remove(self, name: str) -> None:
        """Delete ``name`` if it is there (never through a link)."""
        if self.local is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.local / name)
            return
        from capaudit.core.storage.remote_write import remove_object

        remove_object(self.url(name), self.options)

    def remove_tree(self) -> None:
        """Delete this folder and what is in it (a link is removed, never followed)."""
        if self.local is not None:
            if self.local.is_symlink():
                self.local.unlink()
            elif self.local.is_dir():
                shutil.rmtree(self.local)
            return
        from capaudit.core.storage.remote_write import remove_object

        remove_object(self.location + "/", self.options, recursive=True)

    @contextlib.contextmanager
    def local_file(self, name: str) -> Iterator[Path]:
        """A local path holding ``name`` (a temporary copy of a remote object)."""
        from capaudit.core.storage.local_copy import local_copy

        with local_copy(self.url(name), self.options) as path:
            yield path


@contextlib.contextmanager
def staged(location) -> Iterator[Path]:
    """A local folder to build a folder output in (``--report``): ``location`` itself when it
    is local; for a URL a private temporary folder whose files are uploaded, each whole and
    under its own name (replacing only objects of those names), when the block ends cleanly;
    nothing is uploaded after an error."""
    folder = Folder(location)
    if folder.local is not None:
        yield folder.local
        return
    import tempfile

    from capaudit.core.storage.remote_write import check_writable

    check_writable(folder.url("x"))
    tmp = Path(tempfile.mkdtemp(prefix="capaudit-out-"))
    try:
        yield tmp
        for path in sorted(p for p in tmp.rglob("*") if p.is_file() and not p.is_symlink()):
            with open(path, "rb") as src, folder.open_write(
                    path.relative_to(tmp).as_posix()) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _or_none(read: Callable):
    """``read()``, or None where the object is not there."""
    try:
        return read()
    except FileNotFoundError as exc:
        from capaudit.core.storage.fs import is_missing

        if not is_missing(exc):   # a 403 or a 503 that a backend reported as absence
            raise
        return None


@contextlib.contextmanager
def _exclusive_local(path: Path) -> Iterator[BinaryIO]:
    """Our own temporary file, published as ``path`` by a hard link only if ``path`` is
    absent (FileExistsError otherwise): a conditional create with whole content."""
    from capaudit.core.storage.remote_write import Exists
    from capaudit.core.safe_write import new_temp_file, write_error

    tmp = new_temp_file(path)
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path, follow_symlinks=False)
        except FileExistsError:
            raise Exists(f"{path} exists") from None
        except OSError as exc:
            raise write_error(exc, path) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
