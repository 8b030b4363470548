"""Webdataset tars back as tars: read as a stream (``r|*``), members grouped by key, every
member but the caption written with its own header and bytes, in the source's order.

A sample's caption is ``KEY.txt`` or a field of ``KEY.json`` (``caption``, or a
``captions`` list: one caption per entry, its turn the entry's index), as the webdataset
reader takes it (:func:`~capaudit.io.readers.webdataset.parse_sample`); its image id is the
JSON's id field or the key (:func:`~capaudit.io.readers.webdataset.sample_id`). A revised
caption replaces that member's bytes (its header keeps name, mode, mtime, owner; only the
size changes); a caption dropped whole takes its sample with it, image members included
(an image with no caption left has nothing to train on): the sample is counted and listed.

The source must be whole: a member cut short, an unreadable header or a missing
end-of-archive marker stop the shard with one line naming it.
"""

from __future__ import annotations

import copy
import io
import json
import tarfile
import zlib
from typing import Iterator

from capaudit.errors import InputError
from capaudit.io.rewrite.base import Changes, Place, Record, Rewriter, own_changes
from capaudit.io.rewrite.json_records import dumps_like

__all__ = ["TarRewriter"]

_TAIL = 1 << 16
_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error)


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


class TarRewriter(Rewriter):
    def __init__(self, *args, caption_key: str = "caption", id_field: str = "image_id", **kw):
        super().__init__(*args, **kw)
        self.caption_key, self.id_field = caption_key, id_field
        self.out_tar: tarfile.TarFile | None = None

    # -- reading ----------------------------------------------------------------------
    def records(self) -> Iterator[Record]:
        from capaudit.io.readers.webdataset import _read_member, member_limits

        text_cap, image_cap = member_limits()
        src = _Tail(self.src)
        try:
            tf = tarfile.open(fileobj=src, mode="r|*")
        except _ERRORS as exc:
            raise InputError(f"not a readable tar shard ({exc})", path=self.path,
                             fix="rebuild or re-download the shard") from None
        key, members, n, row = None, [], 0, 0
        while True:
            try:
                member = tf.next()
            except _ERRORS as exc:
                raise self._broken(f"truncated or corrupt tar after {n} members ({exc})")
            if member is None:
                break
            n += 1
            data = _read_member(tf, member, self.path, text_cap, image_cap) \
                if member.isfile() else None
            name = member.name.rsplit("/", 1)[-1]
            this = member.name[:len(member.name) - len(name)] + name.split(".", 1)[0] \
                if member.isfile() and "." in name else key
            if key is not None and this != key and members:
                yield self._record(row, key, members)
                row, members = row + 1, []
            key = this
            members.append((member, data))
        self._check_end(tf, src, n)
        if members:
            yield self._record(row, key, members)

    def _broken(self, why: str) -> InputError:
        return InputError(why, path=self.path, fix="rebuild or re-download the shard")

    def _check_end(self, tf: tarfile.TarFile, src: _Tail, n: int) -> None:
        """Two zero blocks must follow the last member (stream mode stops silently at a cut)."""
        try:
            src.drain()
        except _ERRORS as exc:
            raise self._broken(f"truncated or corrupt tar after {n} members ({exc})")
        start = tf.offset - (src.total - len(src.tail))
        end = bytes(src.tail[max(start, 0):max(start, 0) + 2 * tarfile.BLOCKSIZE])
        if len(end) == 2 * tarfile.BLOCKSIZE and not end.strip(b"\0"):
            return
        if end[:tarfile.BLOCKSIZE].strip(b"\0"):
            raise self._broken(f"corrupt tar: unreadable header at byte {tf.offset} after "
                               f"{n} members")
        raise self._broken(f"truncated tar: no end-of-archive marker after {n} members "
                           f"(the file ends at byte {src.total})")

    def _record(self, row: int, key: str, members: list) -> Record:
        from capaudit.io.readers.webdataset import parse_sample, sample_id

        files = {_ext(m): d for m, d in members if _ext(m)}
        meta, texts = parse_sample(key, files, self.path, row + 1, self.caption_key)
        iid, _ = sample_id(key, meta, self.id_field)
        shown = str(meta.get("key", key)) if iid is None else str(iid)
        where = "captions" if isinstance(meta.get("captions"), list) else \
            "json" if self.caption_key in meta else "txt"
        places = []
        for turn, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"sample '{key}' caption is not text", path=self.path,
                                 row=row + 1)
            places.append(Place(turn if where == "captions" else None, text, shown, iid))
        return Record(row, places, (members, meta, where),
                      sum(len(d) for _, d in members if d is not None))

    # -- writing ----------------------------------------------------------------------
    def write_record(self, rec: Record, changes: Changes) -> bool:
        members, meta, where = rec.raw
        mine = own_changes(rec, changes)
        new = self._revised(rec, meta, where, mine) if mine else None
        if mine and new is None:
            self.log.dropped(rec.index, chars=sum(len(p.text) for p in rec.places),
                             key=rec.places[0].image_key if rec.places else None)
            return False
        if self.out_tar is None:
            self.out_tar = tarfile.open(fileobj=self.out, mode="w|", format=tarfile.PAX_FORMAT)
        ext = "txt" if where == "txt" else "json"
        for member, data in members:
            if new is not None and _ext(member) == ext:
                member, data = copy.copy(member), new
                member.size = len(data)
            self.out_tar.addfile(member, io.BytesIO(data) if data is not None else None)
        return True

    def _revised(self, rec: Record, meta: dict, where: str, mine: dict) -> bytes | None:
        """The caption member's new bytes; None when the sample's every caption went."""
        if where == "txt" or where == "json":
            text = mine[None]
            if text is None:
                return None
            self.log.revised(rec.index, rec.places[0].text, text, member=where)
            if where == "txt":
                return text.encode("utf-8")
            raw = _member(rec.raw[0], "json")
            meta = {**meta, self.caption_key: text}
            return dumps_like(meta, raw.decode("utf-8"), "").encode("utf-8")
        caps = self.log.revised_list(rec.index, meta["captions"], mine)
        if not caps:
            return None
        raw = _member(rec.raw[0], "json")
        return dumps_like({**meta, "captions": caps}, raw.decode("utf-8"), "").encode("utf-8")

    def finish(self) -> None:
        if self.out_tar is None:   # every sample went: an empty, valid tar
            self.out_tar = tarfile.open(fileobj=self.out, mode="w|", format=tarfile.PAX_FORMAT)
        self.out_tar.close()


def _ext(member: tarfile.TarInfo) -> str | None:
    """A file member's extensions (``jpg``, ``json``, ``seg.png``), None for anything else."""
    name = member.name.rsplit("/", 1)[-1]
    return name.split(".", 1)[1] if member.isfile() and "." in name else None


def _member(members: list, ext: str) -> bytes:
    return next(d for m, d in members if _ext(m) == ext)
