"""Where a JSON record keeps its captions, and how a change is put back into it.

Two kinds of record (``sets add`` reads both):

- conversations (LLaVA / ShareGPT4V ``conversations``, ShareGPT ``messages``, LLaVA QA
  ``output``): the captions are the assistant turns, read by the format's own reader
  (:class:`~capaudit.io.readers.records.RecordReader`: ``--turns``, ``--where``), so a
  caption's ``(record, turn)`` is the one ``sets add`` stored as ``meta.src`` / ``meta.turn``;
- flat records (CapsFusion, JSONL, a JSON list such as COCO results
  ``[{"image_id", "caption"}]``): the caption is one field (``--caption-col`` or the
  reader's candidates), its turn None.

A dropped caption removes its record (a flat one), or its assistant turn and the question
before it (a conversation), moving that question's ``<image>`` token to the next kept
question so the record still matches its image (LLaVA counts them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.readers.records import JOIN_SEP
from capaudit.io.rewrite.base import ChangeLog, Place

__all__ = ["RecordLayout", "ANSWER_ROLES", "QUESTION_ROLES", "TOKEN_DROP_WHY"]

ANSWER_ROLES = ("gpt", "assistant")
QUESTION_ROLES = ("human", "user")
MEDIA_TOKEN = re.compile(r"<image>|<video>|<audio>")
_LEADING = re.compile(r"^(?:(?:<image>|<video>|<audio>)\s*)+")
_TRAILING = re.compile(r"(?:\s*(?:<image>|<video>|<audio>))+$")
TOKEN_DROP_WHY = "no question left to carry its <image> token"
FLAT_CAPTIONS = ("caption", "text", "capsfusion", "description")
FLAT_IDS = ("image_id", "image", "file_name", "filename", "id", "key", "image_url", "url")


def _conversation(rec: dict) -> tuple[list, str, str] | None:
    """(turns list, speaker key, text key) of a conversation record, or None for flat ones."""
    for key, who, text in (("conversations", "from", "value"), ("messages", "role", "content")):
        if isinstance(rec.get(key), list):
            return rec[key], who, text
    return None


class RecordLayout:
    """The captions of a record and the way back, for one format and its reader options."""

    def __init__(self, fmt: str, reader=None, caption_col: str | None = None,
                 id_col: str | None = None):
        self.fmt, self.reader = fmt, reader
        self.caption_col, self.id_col = caption_col, id_col
        # a reader over records (LLaVA, ShareGPT): sets add numbers them by line; DuckDB's
        # readers of flat records skip blank lines
        self.by_line = reader is not None and hasattr(reader, "captions")

    def _kept(self, index: int) -> bool:
        """Record ``index`` is kept by ``--where`` (a DuckDB expression the reader evaluates
        over the whole file once: :meth:`RecordReader.where_mask`)."""
        if getattr(self.reader, "where_expr", None) is None:
            return True
        if not hasattr(self, "_mask"):

            self._mask = self.reader.where_mask(self._reader_fs_path)
        return index < len(self._mask) and bool(self._mask[index])

    def places(self, index: int, rec: Any) -> list[Place]:
        """The record's captions as ``sets add`` reads them (none when ``--where`` skips it)."""
        if self.by_line:
            if not isinstance(rec, dict) or not self._kept(index):
                return [] if isinstance(rec, dict) else self._not_object(index)
            return [Place(meta.get("turn"), text, str(key), parse_image_id(key))
                    for key, text, meta in self.reader.captions(self._reader_fs_path, index + 1,
                                                                 rec)]
        if not isinstance(rec, dict):
            return self._not_object(index)
        cap = self._field(rec, self.caption_col, getattr(self.reader, "caption_candidates",
                                                          FLAT_CAPTIONS), "caption")
        if cap is None or not isinstance(rec.get(cap), str):
            return []
        idc = self._field(rec, self.id_col, getattr(self.reader, "id_candidates", FLAT_IDS),
                          "id")
        raw = rec.get(idc) if idc else None
        key = str(index) if raw is None else str(raw)
        return [Place(None, rec[cap], key, parse_image_id(raw))]

    _reader_path, _reader_fs_path = "", Path("")

    @property
    def reader_path(self) -> str:
        """The source as the reader names it in messages (a URL stays a URL)."""
        return self._reader_path

    @reader_path.setter
    def reader_path(self, path: str) -> None:
        # made once: a Path per record was 5% of a filter run's CPU
        self._reader_path, self._reader_fs_path = path, Path(path)

    def _not_object(self, index: int) -> list[Place]:
        raise InputError("record is not a JSON object", path=self.reader_path or None,
                         row=index + 1)

    def _field(self, rec: dict, given: str | None, candidates, what: str) -> str | None:
        """The field a flat record keeps its caption (id) in: the one given, else the first
        candidate of the first record that has one (kept for the rest, as a column)."""
        chosen = getattr(self, f"_chosen_{what}", None)
        if chosen is None:
            chosen = given or next((c for c in candidates if c in rec), None)
            setattr(self, f"_chosen_{what}", chosen)
        return chosen

    # -- putting changes back ----------------------------------------------------------
    def apply(self, rec: dict, changes: dict, log: ChangeLog, idx: int) -> bool:
        """Apply a record's changes ``{turn: text or None}``; False when the record goes."""
        conv = _conversation(rec)
        before_turns = list(conv[0]) if conv is not None else None
        alive = True
        # last turn first: dropping a turn leaves the positions of the earlier ones as they are
        for turn, text in sorted(changes.items(), key=lambda c: -1 if c[0] is None else c[0],
                                 reverse=True):
            alive = self._revise(rec, conv, turn, text, log, idx) and alive
        if conv is not None and alive:
            turns, who, key = conv
            if not any(t.get(who) in ANSWER_ROLES for t in turns if isinstance(t, dict)):
                log.dropped(idx, why="no answer left")
                return False
            if not _keep_media_tokens(before_turns, turns, who, key, log, idx):
                return False
            turns[:] = [t for t in turns if t is not None]
        return alive

    def _flat_field(self, rec: dict) -> str | None:
        if self.fmt == "llava" and "output" in rec:
            return "output"
        return self._field(rec, self.caption_col, getattr(self.reader, "caption_candidates",
                                                           FLAT_CAPTIONS), "caption")

    def _revise(self, rec: dict, conv, turn, text: str | None, log: ChangeLog, idx: int) -> bool:
        """Put ``text`` (None: dropped) in place of caption ``turn``; False: drop the record."""
        if conv is None:
            field = self._flat_field(rec)
            before = rec.get(field)
            if text is None:
                log.dropped(idx, chars=len(before) if isinstance(before, str) else None)
                return False
            log.revised(idx, before if isinstance(before, str) else "", text, field=field)
            rec[field] = text
            return True
        turns, who, key = conv
        positions = [i for i, t in enumerate(turns) if isinstance(t, dict)
                     and t.get(who) in ANSWER_ROLES]
        if turn is None:  # --turns join: one caption for all turns
            return self._revise_joined(turns, key, positions, text, log, idx)
        pos = positions[turn]
        before = turns[pos][key]
        if text is None:
            log.entry(idx, "turn dropped", turn=turn, chars=len(before or ""))
            turns[pos] = None
            if pos > 0 and isinstance(turns[pos - 1], dict) and \
                    turns[pos - 1].get(who) not in ANSWER_ROLES:
                turns[pos - 1] = None
            return True
        log.revised(idx, before or "", text, turn=turn)
        turns[pos][key] = text
        return True

    @staticmethod
    def _revise_joined(turns, key, positions, text, log: ChangeLog, idx: int) -> bool:
        if text is None:
            log.dropped(idx)
            return False
        parts = text.split(JOIN_SEP)
        if len(parts) != len(positions):
            raise InputError(f"record {idx + 1}: the joined caption was revised into "
                             f"{len(parts)} parts for {len(positions)} turns",
                             fix="register the file with --turns all to write turns back")
        for n, (p, part) in enumerate(zip(positions, parts)):
            if turns[p][key] != part:
                log.revised(idx, turns[p][key] or "", part, turn=n)
                turns[p][key] = part
        return True


def _keep_media_tokens(before: list, turns: list, who: str, key: str, log: ChangeLog,
                       idx: int) -> bool:
    """Move the ``<image>`` tokens of dropped questions to the next kept question.

    Trainers match each image of a record to one ``<image>`` token in its text: a record
    that lost its token is refused (LLaVA counts them) or trained as text only. The
    tokens go to the next kept question (the nearest earlier one when none follows);
    False when no question is left, and the record is dropped and listed.
    """
    for p, (was, now) in enumerate(zip(before, turns)):
        if now is not None or not isinstance(was, dict) or was.get(who) not in QUESTION_ROLES:
            continue
        text = was.get(key)
        if not isinstance(text, str) or not MEDIA_TOKEN.search(text):
            continue
        kept = [q for q, t in enumerate(turns) if isinstance(t, dict)
                and t.get(who) in QUESTION_ROLES and isinstance(t.get(key), str)]
        target = next((q for q in kept if q > p), kept[-1] if kept else None)
        if target is None:
            log.dropped(idx, why=TOKEN_DROP_WHY, tokens="".join(MEDIA_TOKEN.findall(text)))
            return False
        old = turns[target][key]
        turns[target][key] = _with_tokens_of(text, old)
        log.entry(idx, "token moved", tokens="".join(MEDIA_TOKEN.findall(text)), before=old,
                  after=turns[target][key])
    return True


def _with_tokens_of(source: str, question: str) -> str:
    """``question`` carrying the media tokens of ``source``, placed where they stood there
    (LLaVA writes ``<image>\\nQ`` and ``Q\\n<image>``; tokens mid-text go in front)."""
    lead = _LEADING.match(source)
    trail = _TRAILING.search(source)
    head = lead.group(0) if lead else ""
    tail = trail.group(0) if trail and (not lead or trail.start() >= lead.end()) else ""
    middle = MEDIA_TOKEN.findall(source[len(head):len(source) - len(tail)])
    return head + ("".join(middle) + "\n" if middle else "") + question + tail
