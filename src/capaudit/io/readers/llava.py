"""Conversation files of VLM trainers, and FuseCap's released JSON.

- ``sharegpt4v`` / ``llava``: LLaVA's ``conversations`` layout (``{"id", "image",
  "conversations": [{"from": "human"|"gpt", "value"}]}``), as a JSON list (ShareGPT4V's
  releases) or JSONL; ``llava`` also reads LLaVA's QA files (``{"id", "image",
  "instruction", "output", "type"}`` per line, e.g. ``coco2014_val_gpt4_qa_30x3.jsonl``).
- ``sharegpt``: the ``messages`` layout (``{"messages": [{"role", "content"}], "images":
  [...]}``) that LLaMA-Factory and many VLM trainers read and write.

Every assistant turn can become a caption (``--turns first|all|join``), its question (the
turn before it, LLaVA QA's ``instruction``) kept in the caption's meta (``q``) so that an
export pairs each answer with the question it answered; ``--where`` picks records (``type = 'detail'``). A record's image is its ``image`` (or first of
``images``); a record without one (ScienceQA's text-only questions) is refused by row,
or skipped and counted with ``--skip-no-image``. The record id is never taken for an
image id. Image ids and namespaces come from the file names
(:mod:`capaudit.io.imageids`).

FuseCap releases a mapping from image file name to caption (a list of records too).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from capaudit.errors import InputError
from capaudit.io.layouts.json import is_json_array, load_json_document
from capaudit.io.readers.base import file_line, read_head
from capaudit.io.readers.records import JOIN_SEP, RecordReader, load_records, pick_turns


def _image_of(rec: dict):
    image = rec.get("image")
    if image is None and isinstance(rec.get("images"), list) and rec["images"]:
        image = rec["images"][0]
    if isinstance(image, list):
        image = image[0] if image else None
    return image if isinstance(image, (str, int)) and str(image).strip() else None


class ShareGPT4VReader(RecordReader):
    name = "sharegpt4v"
    expects = "a JSON list of records with 'conversations'"
    speaker, text, assistant, turns_key = "from", "value", "gpt", "conversations"
    accepts = frozenset({"turns", "where", "skip_no_image"})

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return (not path.is_dir() and head.lstrip().startswith(b"[")
                and b'"conversations"' in head)

    def assistant_texts(self, rec: dict) -> list | None:
        """The assistant turns' texts (``None``: the record has no turns list)."""
        if "output" in rec and self.turns_key not in rec:      # LLaVA QA layout
            return [rec["output"]]
        turns = rec.get(self.turns_key)
        if not isinstance(turns, list):
            return None
        return [t.get(self.text) for t in turns
                if isinstance(t, dict) and t.get(self.speaker) == self.assistant]

    def questions(self, rec: dict) -> list:
        """The question each assistant turn answers: the text of the turn just before it
        when that turn is not the assistant's (``None`` when there is none), aligned with
        :meth:`assistant_texts`; kept at ingest so an export pairs each answer with it."""
        if "output" in rec and self.turns_key not in rec:      # LLaVA QA layout
            q = rec.get("instruction")
            return [q if isinstance(q, str) else None]
        out, last = [], None
        for t in rec.get(self.turns_key) or []:
            if not isinstance(t, dict):
                continue
            if t.get(self.speaker) == self.assistant:
                out.append(last)
                last = None
            else:
                last = t.get(self.text) if isinstance(t.get(self.text), str) else None
        return out

    def captions(self, path: Path, row: int, rec: dict) -> Iterator[tuple]:
        texts = self.assistant_texts(rec)
        if texts is None:
            raise InputError(f"record lacks '{self.turns_key}'", path=path, row=row,
                             fix=f"use the {self.name} layout or pass the right --format")
        image = _image_of(rec)
        if image is None:
            self.no_image(path, row)
            return
        if not texts:
            raise InputError(f"record has no '{self.assistant}' turn to take the caption from",
                             path=path, row=row)
        asked = self.questions(rec)
        for turn, text in pick_turns(texts, self.turns):
            meta = {"src": row - 1, "turn": turn, "q": asked[turn] if turn is not None else
                    JOIN_SEP.join(q for q in asked if q) or None}
            if rec.get("id") is not None:
                meta["id"] = rec["id"]
            yield image, text, meta


class LLaVAReader(ShareGPT4VReader):
    name = "llava"
    expects = "JSONL/JSON records with 'conversations', or 'instruction' and 'output'"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        first = file_line(path, head)
        return first is not None and first.startswith(b"{") and (
            b'"conversations"' in first or (
            b'"instruction"' in first and b'"output"' in first and b'"image"' in first))


class ShareGPTReader(ShareGPT4VReader):
    name = "sharegpt"
    expects = "records with 'messages' [{role, content}] (and 'images')"
    speaker, text, assistant, turns_key = "role", "content", "assistant", "messages"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return (not path.is_dir() and head.lstrip()[:1] in (b"[", b"{")
                and b'"messages"' in head and b'"role"' in head)


class FuseCapReader(RecordReader):
    name = "fusecap"
    expects = "a JSON object mapping image file names to captions"
    accepts = frozenset({"id_col", "caption_col"})   # a list of records' columns

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir() or path.suffix.lower() != ".json":
            return False
        return re.match(rb'\s*\{\s*"[^"]+\.(?:jpg|jpeg|png)"\s*:', head, re.I) is not None

    def _rows(self, path: Path, data):
        if isinstance(data, dict):
            for i, (key, cap) in enumerate(data.items()):
                if not isinstance(cap, str):
                    raise InputError(f"value for {key!r} is not a caption string", path=path,
                                     row=i + 1)
                yield key, cap, {"src": key}
        else:       # the records of a JSON array, streamed (:meth:`read`)
            id_col = self.id_col
            cap_col = self.caption_col or "caption"
            for i, rec in enumerate(data):
                if not isinstance(rec, dict):
                    raise InputError("each record must be an object", path=path, row=i + 1)
                key_col = id_col or next((c for c in ("image", "file_name", "image_id", "id")
                                          if c in rec), None)
                if key_col is None or key_col not in rec or cap_col not in rec:
                    raise _no_column(rec, path, i + 1, cap_col)
                yield rec[key_col], rec[cap_col], {"src": i}

    def read(self, path: Path):
        if is_json_array(read_head(path, 1 << 12)):   # a list of records: streamed
            yield from self.emit(self._rows(path, (rec for _, rec in load_records(path))))
            return
        data = load_json_document(path)
        if not isinstance(data, dict):
            raise InputError("FuseCap JSON must be a mapping or a list", path=path)
        yield from self.emit(self._rows(path, data))


def _no_column(rec: dict, path: Path, row: int, cap_col: str) -> InputError:
    """A FuseCap record list's missing image or caption field, with the fields there are
    and the likely ones (:mod:`capaudit.io.readers.columns`)."""
    from capaudit.io.readers.columns import likely_ids, missing_caption

    if cap_col in rec:
        ids = likely_ids(list(rec), [rec], exclude=[cap_col])
        return InputError(f"record has no image column (columns: {', '.join(rec)})", path=path,
                          row=row, fix=f"pass --id-col {ids[0] if ids else 'NAME'}")
    return missing_caption(list(rec), [rec], path=path, row=row,
                           given=cap_col if cap_col != "caption" else None)
