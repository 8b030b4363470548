"""JSON arrays of flat records: the COCO results layout, and any other list of records.

- ``coco-results``: ``[{"image_id": 391895, "caption": "..."}]``, what coco-caption's
  evaluation, LAVIS/BLIP and most CHAIR and POPE pipelines write: the most common
  captioner output there is. Sniffed from its first record (an object with ``image_id``
  and a string ``caption``). Its ids are handled as in every COCO-family reader: an
  integer (or a text of ASCII digits) is the image id, a float or a boolean is refused by
  row (rounding names another image), and the layout alone names no dataset (nocaps and
  Flickr results share it): the ids stay unassigned until the audit's coverage check or
  ``--namespace`` says whose they are. Extra fields (``score``, ``question_id``) are kept
  in the source and written back untouched by ``sets export --to original``.
- ``json``: any other JSON array of flat records (a captioner's predictions beside its
  references: ``{"image_name", "captions": [...], "prediction"}``), columns picked as for
  JSONL (``--id-col``, ``--caption-col``); a file-name field (``image_name``,
  ``file_name``, ``image``) maps to an id as everywhere (:mod:`capaudit.io.imageids`).
  When the names are not the ones known, one line names the columns and the likely id and
  caption among them (:mod:`capaudit.io.readers.columns`).

Both stream the array record by record (:mod:`capaudit.io.layouts.json`) and record each
caption's place (``meta.src``, the 0-based record index) so the set can be written back.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterator

from capaudit.errors import InputError
from capaudit.io.imageids import require_image_id
from capaudit.io.layouts.json import is_json_array, iter_array_records
from capaudit.io.readers.columns import (CAPTION_CANDIDATES, ID_CANDIDATES, missing_caption,
                                         namespace_hint, not_captions, refuse_row_numbers)
from capaudit.io.readers.records import RecordReader, load_records

SAMPLE_RECORDS = 50   # records whose fields and values the column hints read


def first_record(head: bytes):
    """The first record of a JSON array from a file's head, or ``None`` (not an array, or
    a first record longer than the head)."""
    if not is_json_array(head):
        return None
    try:
        return next(iter_array_records(io.BytesIO(head)), (0, None))[1]
    except InputError:      # the head ends inside the first record (or a damaged one)
        return None


def not_a_list(path: Path, fmt: str, expects: str) -> None:
    """A JSON document that is no list (an indented object: the CHAIR script's output) read
    with ``--format json``/``coco-results``: one line naming what the format wants and what
    the file is, not JSONL's "one JSON object per line" (#46). JSONL is still read."""
    from capaudit.io.layouts.json import load_json_document
    from capaudit.io.readers.base import first_line, read_head

    head = read_head(path, 1 << 12)
    if is_json_array(head):
        return
    try:
        json.loads(first_line(head))
        return                       # one JSON value per line: read as JSONL
    except ValueError:
        pass
    doc = load_json_document(path)   # a damaged document: its line and column
    what = (f"one JSON object with keys {', '.join(map(str, list(doc)[:6]))}"
            + (", ..." if len(doc) > 6 else "") if isinstance(doc, dict)
            else f"one JSON {type(doc).__name__}")
    raise InputError(f"--format {fmt} wants {expects}; the file is {what}", path=path,
                     fix="give the list of records (as a file of its own, or JSONL), or "
                         "--format auto to have the layout recognised")


class JsonListReader(RecordReader):
    """A JSON array of flat records; the id and caption columns picked by name."""

    name = "json"
    expects = "a JSON list of records with an id and a caption field"
    accepts = frozenset({"id_col", "caption_col", "where"})
    id_candidates = ID_CANDIDATES
    caption_candidates = CAPTION_CANDIDATES
    strict_ids = False      # coco-results: a number that is not an integer id is refused

    def __init__(self, *args, **options):
        super().__init__(*args, **options)
        self.chosen: tuple[str | None, str] | None = None
        self.namespace_hint: str | None = None   # sets add prints it (columns.namespace_hint)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        rec = None if path.is_dir() else first_record(head)
        return isinstance(rec, dict) and not any(isinstance(v, (dict, list)) and k in (
            "conversations", "messages") for k, v in rec.items())

    def rows(self, path: Path) -> Iterator[tuple]:
        not_a_list(path, self.name, self.expects)
        yield from super().rows(path)

    def pick(self, path: Path, row: int, rec: dict) -> tuple[str | None, str]:
        """(id column, caption column) from the first record, or one line with hints."""
        cols = list(rec)
        cap = self.caption_col or next((c for c in self.caption_candidates if c in rec), None)
        if cap is None or cap not in rec:
            raise missing_caption(cols, self._sample(path), path=path, row=row,
                                  given=self.caption_col)
        if self.caption_col is None:   # picked by name: questions or prompts are refused
            err = not_captions(cols, self._sample(path), cap, path=path)
            if err is not None:
                raise err
        idc = self.id_col or next((c for c in self.id_candidates if c in rec), None)
        if self.id_col and self.id_col not in rec:
            raise InputError(f"no column '{self.id_col}' (columns: {', '.join(cols)})",
                             path=path, row=row, fix="pass --id-col with one of those columns")
        if idc is None:
            refuse_row_numbers(cols, cap, lambda: self._sample(path), path=path)
        self.namespace_hint = namespace_hint(idc, self._sample(path))
        return idc, cap

    def _sample(self, path: Path) -> list[dict]:
        out = []
        for _, rec in load_records(path):
            if isinstance(rec, dict):
                out.append(rec)
            if len(out) >= SAMPLE_RECORDS:
                break
        return out

    def captions(self, path: Path, row: int, rec: dict) -> Iterator[tuple]:
        if self.chosen is None:
            self.chosen = self.pick(path, row, rec)
        idc, cap = self.chosen
        if cap not in rec:
            raise InputError(f"record has no '{cap}' field (fields: {', '.join(rec)})",
                             path=path, row=row, fix="give every record a caption, or pass "
                                                     "--caption-col")
        text = rec[cap]
        if text is not None and not isinstance(text, str):
            raise InputError(f"'{cap}' is not a caption string (got {type(text).__name__})",
                             path=path, row=row, fix="captions must be JSON strings; pass "
                                                     "--caption-col naming a text field")
        if idc is None:
            key = row - 1                          # no id field at all: the record's number
        elif idc not in rec or rec[idc] is None:
            raise InputError(f"record has no '{idc}'", path=path, row=row,
                             fix="give every record its image id")
        else:
            key = self.image_key(rec[idc], idc, path, row)
        yield key, text, {"src": row - 1}

    def image_key(self, value, field: str, path: Path, row: int):
        """The record's image key (its id is parsed from it as in every reader)."""
        if isinstance(value, (dict, list)):
            raise InputError(f"'{field}' is a {type(value).__name__}, not an image id",
                             path=path, row=row, fix="pass --id-col naming the id field")
        if self.strict_ids and not isinstance(value, str):
            return require_image_id(value, what=field, path=path, row=row)
        return value


class CocoResultsReader(JsonListReader):
    name = "coco-results"
    expects = "a JSON list of {\"image_id\", \"caption\"} records (COCO results)"
    strict_ids = True

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        rec = None if path.is_dir() else first_record(head)
        return (isinstance(rec, dict) and "image_id" in rec
                and isinstance(rec.get("caption"), str))
