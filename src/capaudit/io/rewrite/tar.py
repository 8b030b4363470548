"""Webdataset tars back as tars: read as a stream by the layout's reader
(:class:`~capaudit.io.layouts.tar.TarReader`), members grouped by key, every
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
import tarfile
from typing import Iterator

from capaudit.errors import InputError
from capaudit.io.layouts.tar import PAX, TarReader, open_writer, sample_key
from capaudit.io.rewrite.base import Changes, Place, Record, Rewriter, own_changes
from capaudit.io.layouts.json import dumps_like

__all__ = ["TarRewriter"]


class TarRewriter(Rewriter):
    def __init__(self, *args, caption_key: str = "caption", id_field: str = "image_id", **kw):
        super().__init__(*args, **kw)
        self.caption_key, self.id_field = caption_key, id_field
        self.out_tar: tarfile.TarFile | None = None

    # -- reading ----------------------------------------------------------------------
    def records(self) -> Iterator[Record]:
        reader = TarReader(self.path, self.src, stream=True)
        key, members, row = None, [], 0
        for member in reader:
            data = reader.read(member) if member.isfile() else None
            this = sample_key(member)
            this = key if this is None else this
            if key is not None and this != key and members:
                yield self._record(row, key, members)
                row, members = row + 1, []
            key = this
            members.append((member, data))
        if members:
            yield self._record(row, key, members)

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
            self.out_tar = open_writer(self.out, PAX, stream=True)
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
            self.out_tar = open_writer(self.out, PAX, stream=True)
        self.out_tar.close()


def _ext(member: tarfile.TarInfo) -> str | None:
    """A file member's extensions (``jpg``, ``json``, ``seg.png``), None for anything else."""
    name = member.name.rsplit("/", 1)[-1]
    return name.split(".", 1)[1] if member.isfile() and "." in name else None


def _member(members: list, ext: str) -> bytes:
    return next(d for m, d in members if _ext(m) == ext)
