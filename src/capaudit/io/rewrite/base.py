"""Writing a caption source back in its own layout, record by record: what every format shares.

Why a package: a cleaned corpus goes back out in the layout it came in, from two places
(``sets export --to original`` of a filtered set, and each shard of ``filter run --shards``),
and both must write exactly the same bytes. One writer per output format (datatrove's
reader -> steps -> writer shape): it reads its source as a stream of :class:`Record` s in
bounded batches, each record with its captions and their places (``meta.src`` is the
record's index, ``meta.turn`` the caption's turn, as ``sets add`` numbers them), and writes
each batch back with the changes it is given (``{(record, turn): new text or None}``, None:
dropped). Everything a change does not touch is copied as read: JSONL lines, JSON-array
records and their gaps, CSV records, tar members with their headers, parquet rows with the
schema.

:class:`ChangeLog` lists what changed without repeating the captions: a revised caption is
its edits (offset in the original text, the text removed, the text put in), a dropped one
its length.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterator, Mapping

__all__ = ["Place", "Record", "Rewriter", "ChangeLog", "caption_edits", "Changes",
           "BATCH_RECORDS", "BATCH_BYTES"]

BATCH_RECORDS = 1024          # records per batch at most ...
BATCH_BYTES = 16 << 20        # ... and about this much of their raw bytes (tar images)

Changes = Mapping[tuple[int, Any], "str | None"]
_SEGMENT = re.compile(r"(?<=[.!?])(\s+)|(\n+)")


@dataclass
class Place:
    """One caption of a record, as ``sets add`` reads it."""

    turn: int | None
    text: str
    image_key: str | None = None
    image_id: int | None = None


@dataclass
class Record:
    """One source record: its index (``meta.src``), its captions, and the format's own
    payload (raw text, value, tar members, a parquet row)."""

    index: int
    places: list[Place] = field(default_factory=list)
    raw: Any = None
    size: int = 0


def caption_edits(before: str, after: str) -> list[list]:
    """``[[offset in before, removed, inserted], ...]``: what turned ``before`` into ``after``,
    at sentence grain (a dropped sentence is one edit, its offset where it began), never the
    whole caption again."""
    a, b = _segments(before), _segments(after)
    pos = [0]
    for seg in a:
        pos.append(pos[-1] + len(seg))
    return [[pos[i1], "".join(a[i1:i2]), "".join(b[j1:j2])] for tag, i1, i2, j1, j2 in
            difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if tag != "equal"]


def _segments(text: str) -> list[str]:
    """``text`` cut before the whitespace that follows each sentence's end (so a sentence
    carries the space before it; concatenated: ``text``)."""
    out, last = [], 0
    for m in _SEGMENT.finditer(text):
        if m.start() > last:
            out.append(text[last:m.start()])
            last = m.start()
    out.append(text[last:])
    return out


class ChangeLog:
    """The ``.changes.jsonl`` lines of one output (an open text handle, or None: counted
    only), and the counts of what changed."""

    def __init__(self, fh: IO[str] | None = None):
        self.fh = fh
        self.counts = {"records_in": 0, "records_out": 0, "records_dropped": 0,
                       "captions_revised": 0, "captions_dropped": 0}

    def entry(self, record: int, action: str, **fields) -> None:
        if action == "revised":
            self.counts["captions_revised"] += 1
        elif action in ("turn dropped", "caption dropped"):
            self.counts["captions_dropped"] += 1
        if self.fh is not None:
            self.fh.write(json.dumps({"record": record, "action": action, **fields},
                                     ensure_ascii=False) + "\n")

    def revised(self, record: int, before: str, after: str, **where) -> None:
        if self.fh is None:   # counted only: no edits to work out (a diff per revised caption)
            self.entry(record, "revised")
            return
        self.entry(record, "revised", **where, edits=caption_edits(before, after))

    def revised_list(self, record: int, captions: list, changes: dict) -> list:
        """A record's list of captions (``captions`` of a webdataset JSON, a parquet list
        cell) with ``changes`` ``{turn: text or None}`` applied and listed."""
        caps = list(captions)
        for turn, text in sorted(changes.items(), reverse=True):
            if text is None:
                self.entry(record, "turn dropped", turn=turn, chars=len(caps[turn]))
                del caps[turn]
            else:
                self.revised(record, caps[turn], text, turn=turn)
                caps[turn] = text
        return caps

    def one_caption(self, record: int, before: str, after: str | None, **where) -> bool:
        """A record's one caption revised to ``after``, or dropped (None) with its record;
        False when the record goes."""
        if after is None:
            self.dropped(record, chars=len(before))
            return False
        self.revised(record, before, after, **where)
        return True

    def dropped(self, record: int, why: str | None = None, chars: int | None = None,
                **where) -> None:
        self.counts["records_dropped"] += 1
        extra = {"why": why} if why else {}
        self.entry(record, "dropped", **where, **({"chars": chars} if chars is not None
                                                 else {}), **extra)


class Rewriter:
    """Base of the format writers: :meth:`batches` reads the source, :meth:`write` writes a
    batch back with its changes, :meth:`finish` closes the output's structure."""

    def __init__(self, src: IO[bytes], out: IO[bytes] | None, path: str, log: ChangeLog,
                 batch_records: int = BATCH_RECORDS, batch_bytes: int = BATCH_BYTES):
        self.src, self.out, self.path, self.log = src, out, path, log
        self.batch_records, self.batch_bytes = batch_records, batch_bytes

    def records(self) -> Iterator[Record]:  # pragma: no cover - each format's own
        raise NotImplementedError

    def batches(self) -> Iterator[list[Record]]:
        """The records in batches bounded by count and by raw bytes."""
        batch, size = [], 0
        for rec in self.records():
            batch.append(rec)
            size += rec.size
            if len(batch) >= self.batch_records or size >= self.batch_bytes:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def write(self, records: list[Record], changes: Changes) -> None:
        for rec in records:
            if rec.index < 0:          # not a record (a blank line): copied as it is
                self.write_record(rec, changes)
                continue
            self.log.counts["records_in"] += 1
            if self.write_record(rec, changes):
                self.log.counts["records_out"] += 1

    def write_record(self, rec: Record, changes: Changes) -> bool:  # pragma: no cover
        raise NotImplementedError

    def finish(self) -> None:
        """Close the output's structure (a JSON array's bracket, a parquet footer)."""

    def abort(self) -> None:
        """Let go of the output after a failure (its temporary file is removed by its
        opener): a writer that would write on its own when collected is closed here."""


def own_changes(rec: Record, changes: Changes) -> dict:
    """``{turn: new text or None}`` of the record's captions that changed."""
    return {p.turn: changes[(rec.index, p.turn)] for p in rec.places
            if (rec.index, p.turn) in changes}


def pulled(stream: Iterator[tuple[int, Any, "str | None"]]) -> Callable[[list[Record]], dict]:
    """Changes from a stream of ``(record, turn, text)`` in record order, handed out batch by
    batch: ``pull(batch)`` returns the batch's changes (memory: one batch's changes)."""
    head: list = [next(stream, None)]

    def pull(batch: list[Record]) -> dict:
        last = max((r.index for r in batch), default=-1)
        out = {}
        while head[0] is not None and head[0][0] <= last:
            rec, turn, text = head[0]
            out[(rec, turn)] = text
            head[0] = next(stream, None)
        return out
    return pull
