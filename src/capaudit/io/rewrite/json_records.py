"""JSON records back in their file: a JSON array (ShareGPT4V, LLaVA, COCO results, CapsFusion)
or JSONL, streamed record by record.

The array is read with :mod:`capaudit.io.layouts.json`, which hands each record's exact text
and the text between records: an untouched record is copied as it was, a changed one is
written again in the way its own text was written (its indentation, separators and
escaping, measured on the record), a dropped one goes with the comma before it. A file
written by ``json.dumps(records, indent=N)`` comes back as ``json.dumps`` of the revised
list would write it; any other file keeps its own bytes wherever nothing changed. JSONL:
untouched lines byte for byte, a changed line as ``json.dumps(record, ensure_ascii=False)``
with the line's own ending, blank lines kept.
"""

from __future__ import annotations

import json
from typing import Iterator

from capaudit.errors import InputError
from capaudit.io.layouts.json import dumps_like, revised_in_place
from capaudit.io.rewrite.base import Changes, Record, Rewriter, own_changes
from capaudit.io.rewrite.layouts import RecordLayout

__all__ = ["JsonArrayRewriter", "JsonlRewriter", "CocoRewriter", "ChairRewriter"]


class JsonArrayRewriter(Rewriter):
    """A top-level JSON array, record by record (bounded memory at any size)."""

    def __init__(self, *args, layout: RecordLayout, **kw):
        super().__init__(*args, **kw)
        self.layout = layout
        self.opening: str | None = None   # the text before the first record ("[\n ")
        self.tail = "\n]"                  # the text after the last one
        self.written = 0

    def records(self) -> Iterator[Record]:
        from capaudit.io.layouts.json import iter_array_pieces

        gap = ""
        for kind, index, text, value in iter_array_pieces(self.src, self.path):
            if kind == "gap":
                if index == -1:
                    self.tail = text
                elif index == 0:
                    self.opening = gap = text
                else:
                    gap = text
                continue
            yield Record(index, self.layout.places(index, value), (gap, text, value), len(text))

    def write_record(self, rec: Record, changes: Changes) -> bool:
        gap, text, value = rec.raw
        mine = own_changes(rec, changes)
        if mine:
            if not self.layout.apply(value, mine, self.log, rec.index):
                return False
            text = revised_in_place(text, rec, mine, value) or dumps_like(value, text, gap)
        self.out.write(((self.opening or "[") if not self.written else gap).encode("utf-8"))
        self.out.write(text.encode("utf-8"))
        self.written += 1
        return True

    def finish(self) -> None:
        if self.written:
            self.out.write(self.tail.encode("utf-8"))
            return
        # every record went: an empty array, with whatever followed the closing bracket
        close = self.tail.rfind("]")
        self.out.write(("[]" + self.tail[close + 1:]).encode("utf-8"))


class JsonlRewriter(Rewriter):
    """JSONL, line by line; a record's index is its line (readers over records) or its
    place among the non-blank lines (the DuckDB readers), as ``sets add`` numbered it."""

    def __init__(self, *args, layout: RecordLayout, **kw):
        super().__init__(*args, **kw)
        self.layout = layout

    def records(self) -> Iterator[Record]:
        n = 0
        for line_no, line in enumerate(self.src):
            if not line.strip():
                yield Record(-1, [], (line, None), len(line))
                continue
            index = line_no if self.layout.by_line else n
            n += 1
            try:
                value = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                raise InputError("malformed JSON line", path=self.path, row=line_no + 1,
                                 fix="one JSON object per line") from None
            yield Record(index, self.layout.places(index, value), (line, value), len(line))

    def write_record(self, rec: Record, changes: Changes) -> bool:
        line, value = rec.raw
        mine = own_changes(rec, changes) if rec.index >= 0 else None
        if mine:
            if not self.layout.apply(value, mine, self.log, rec.index):
                return False
            end = b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""
            line = json.dumps(value, ensure_ascii=False).encode("utf-8") + end
        self.out.write(line)
        return True


class CocoRewriter(Rewriter):
    """COCO captions JSON (``{"images", "annotations": [...]}``): one document, read whole
    (a dataset's captions file, not a corpus); the annotations are the records, written
    back as ``json.dumps`` would, in the file's indentation and escaping."""

    records_key, what = "annotations", "COCO captions JSON"

    def records(self) -> Iterator[Record]:
        from capaudit.io.rewrite.base import Place

        raw = self.src.read()
        self.style = _json_style(raw)
        try:
            self.data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise InputError(f"not a readable {self.what}", path=self.path,
                             fix="restore the file the set was registered from") from None
        self.kept: list = []
        for i, ann in enumerate(self.data[self.records_key]):
            cap = ann.get("caption") if isinstance(ann, dict) else None
            places = [Place(None, cap, str(ann.get("image_id")))] if isinstance(cap, str) \
                else []
            yield Record(i, places, ann, len(cap or ""))

    def write_record(self, rec: Record, changes: Changes) -> bool:
        mine = own_changes(rec, changes)
        if mine:
            if not self.log.one_caption(rec.index, rec.raw["caption"], mine[None],
                                        field="caption"):
                return False
            rec.raw["caption"] = mine[None]
        self.kept.append(rec.raw)
        return True

    def finish(self) -> None:
        self.data[self.records_key] = self.kept
        style = self.style
        self.out.write((json.dumps(self.data, indent=style["indent"],
                                   ensure_ascii=style["ensure_ascii"]) + style["end"]
                        ).encode("utf-8"))


class ChairRewriter(CocoRewriter):
    """CHAIR's output (``{"sentences": [...], "overall_metrics"}``,
    :mod:`capaudit.io.readers.chair`): the sentences are the records, each revised
    ``caption`` in place, a dropped one's sentence left out; every other field (the file's
    per-sentence ``metrics`` and ``mscoco_*`` words, ``overall_metrics``) is kept as the
    file had it: they score the captions as they were, not as revised (the export says so)."""

    records_key, what = "sentences", "CHAIR output JSON"


def _json_style(raw: bytes) -> dict:
    """Indent and escaping of a JSON document, so an untouched file comes back the same."""
    text = raw.decode("utf-8")
    indent = None
    lines = text.split("\n", 2)
    if len(lines) > 1 and lines[0].strip() in ("[", "{"):
        indent = len(lines[1]) - len(lines[1].lstrip(" "))
    return {"indent": indent or None, "ensure_ascii": not any(ord(c) > 127 for c in text),
            "end": "\n" if text.endswith("\n") else ""}
