"""Human hallucination labels: one registry, one small class per published layout.

Why a registry of its own: ``filter validate`` compares a filter's decisions with what
people marked, and people publish their marks in many layouts (a 0/1 per caption, per
sentence, per word, character spans, atomic facts, a 1-5 grade). Each layout is one class
here, registered by name in :data:`LABEL_LAYOUTS` (the table at the end of this file),
sniffed from the first record where it is unambiguous and forced with ``--layout NAME``.

A layout turns one record of the file into a :class:`Labelled`: the image id and the
caption text as given (joined to a set by :mod:`capaudit.filters.validate.join`) and what
the people said, in the one form the validation reads: a caption-level 0/1
(``label``; 1 = the caption holds a hallucination), hallucinated character ``spans``,
labelled ``sentences`` (text, 0/1) or a ``grade``. Records are read with the standard
library (JSON Lines, CSV or a JSON list / ``{"annotations": [...]}``): label files are
small, and a bad row is named by its line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from capaudit.core.registry import Registry
from capaudit.errors import InputError

__all__ = ["LABEL_LAYOUTS", "LabelLayout", "Labelled", "read_records", "sniff_layout",
           "read_labels", "binary", "text_field", "json_field"]

LABEL_LAYOUTS: Registry = Registry("label layout", group="label_layouts")


@dataclass
class Labelled:
    """One labelled caption (or, before merging, one labelled sentence of it)."""

    row: int                                   # the record's line (JSONL) or row (CSV, JSON)
    image_id: str
    caption: str
    label: int | None = None                   # 1 = holds a hallucination
    spans: list[tuple[int, int]] | None = None  # hallucinated characters [start, end)
    sentences: list[tuple[str, int]] | None = None  # (sentence text, 0/1)
    grade: float | None = None                 # a graded score (1-5: higher = more faithful)
    notes: dict = field(default_factory=dict)  # layout facts (facts, disagreeing repeats)

    def caption_label(self) -> int | None:
        """1/0 for the whole caption, from whatever the layout gave (None: a grade only)."""
        if self.label is not None:
            return self.label
        if self.spans is not None:
            return int(bool(self.spans))
        if self.sentences is not None:
            return int(any(lab for _, lab in self.sentences))
        return None


class LabelLayout:
    """Base class: ``name``, the keys it needs (``fields``; ``expects``, named when nothing
    sniffs, lists them unless set), :meth:`sniff` on the first record's keys, :meth:`parse`
    one record.

    ``repeats``: what two records of the same (image, caption) mean: ``"merge"`` (one
    caption's sentences, row by row), ``"any"`` (the published rule: hallucinated if any
    says so, reported) or ``"error"`` (a duplicate with a different label is refused)."""

    name = "base"
    fields: tuple[str, ...] = ()   # the keys every record has: sniffed, and ``expects`` by default
    one_of: tuple[str, ...] = ()   # the label's alternative keys: a record has exactly one
    expects = ""
    levels: tuple[str, ...] = ("caption",)
    repeats = "error"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.fields and "expects" not in cls.__dict__:
            cls.expects = ", ".join(cls.fields)

    @classmethod
    def sniff(cls, keys: set[str]) -> bool:
        """The first record has every one of ``fields`` and exactly one of ``one_of`` (a
        layout may ask for more)."""
        return (bool(cls.fields) and set(cls.fields) <= keys
                and (not cls.one_of or len(keys & set(cls.one_of)) == 1))

    def label_key(self, rec: dict) -> str:
        """Which of ``one_of`` this record uses (the first: a missing label is named so)."""
        return next((k for k in self.one_of if k in rec), self.one_of[0])

    def parse(self, rec: dict, row: int, path) -> Labelled:   # pragma: no cover
        raise NotImplementedError


# -- field helpers: one line naming file, row and fix --------------------------------------
def text_field(rec: dict, key: str, row: int, path) -> str:
    value = rec.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InputError(f"'{key}' is missing or empty", path=path, row=row,
                         fix=f"give every record a '{key}'")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def binary(value: Any, row: int, path, key: str = "label",
           yes=("1", "true", "yes", "hallucinated"), no=("0", "false", "no", "faithful")) -> int:
    """0/1 from 0/1, true/false, yes/no (CSV cells are text)."""
    text = str(value).strip().lower()
    if isinstance(value, bool):
        return int(value)
    if text in yes:
        return 1
    if text in no:
        return 0
    raise InputError(f"'{key}' is {str(value)[:40]!r}, not 0/1", path=path, row=row,
                     fix=f"write '{key}' as 1 (hallucinated) or 0 (faithful)")


def json_field(rec: dict, key: str, row: int, path) -> Any:
    """A list field; in a CSV cell it is JSON text (``[[0, 5], [9, 12]]``)."""
    value = rec.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise InputError(f"'{key}' is not JSON", path=path, row=row,
                             fix=f"write '{key}' as a JSON list") from None
    if not isinstance(value, list):
        raise InputError(f"'{key}' is not a list", path=path, row=row,
                         fix=f"write '{key}' as a JSON list")
    return value


# -- records ---------------------------------------------------------------------------
def read_records(path: Path) -> Iterator[tuple[int, dict]]:
    """``(row, record)`` of a JSON Lines, CSV or JSON file (a list, or a dict holding an
    ``annotations`` list as FOIL's and COCO's files do)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("label file not found", path=path,
                         fix="give the path of a label file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the label file ({type(exc).__name__})", path=path,
                         fix="give a UTF-8 JSON Lines, CSV or JSON file") from None
    if not text.strip():
        raise InputError("the label file is empty", path=path,
                         fix="give a file with one labelled caption per line")
    if path.suffix.lower() in (".csv", ".tsv"):
        from capaudit.io.layouts import csv as csv_layout

        yield from csv_layout.dict_rows(text.splitlines(), csv_layout.delimiter(path))
        return
    head = text.lstrip()[:1]
    if head == "[" or (head == "{" and path.suffix.lower() == ".json"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc.msg}, line {exc.lineno})", path=path,
                             fix="give valid JSON, or JSON Lines as .jsonl") from None
        if isinstance(data, dict):
            data = data.get("annotations")
        if not isinstance(data, list):
            raise InputError("a JSON label file must hold a list of records (or "
                             "'annotations')", path=path, fix="give a list of records")
        yield from ((i, r) for i, r in enumerate(data, 1))
        return
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            raise InputError("not a JSON record", path=path, row=i,
                             fix="one JSON object per line (JSON Lines), or a .csv") from None
        yield i, rec


def sniff_layout(rec: dict, path) -> str:
    """The one layout whose :meth:`LabelLayout.sniff` accepts the first record's keys."""
    keys = set(rec) if isinstance(rec, dict) else set()
    hits = [n for n in LABEL_LAYOUTS.names() if LABEL_LAYOUTS.get(n).sniff(keys)]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(LABEL_LAYOUTS.names())
    if not hits:
        raise InputError(f"unknown label layout (fields: {', '.join(sorted(keys))[:120]})",
                         path=path, row=1, fix=f"pass --layout NAME ({known}), see "
                                               "docs/formats.md")
    raise InputError(f"the label layout is ambiguous ({', '.join(hits)})", path=path, row=1,
                     fix=f"pass --layout {hits[0]} (or another of {known})")


def read_labels(path, layout: str | None = None) -> tuple[LabelLayout, list[Labelled]]:
    """The layout (given or sniffed) and every record of ``path`` as a :class:`Labelled`."""
    records = read_records(Path(path))
    out: list[Labelled] = []
    reader = LABEL_LAYOUTS.get(layout)() if layout else None
    for row, rec in records:
        if not isinstance(rec, dict):
            raise InputError("a record is not an object", path=path, row=row,
                             fix="one JSON object (or CSV row) per labelled caption")
        if reader is None:
            reader = LABEL_LAYOUTS.get(sniff_layout(rec, path))()
        out.append(reader.parse(rec, row, path))
    if reader is None or not out:
        raise InputError("the label file holds no record", path=path,
                         fix="give a file with one labelled caption per line")
    return reader, out


for _name, _target in {
    "caption-label": "capaudit.io.labels.plain:CaptionLabels",
    "sentence-label": "capaudit.io.labels.plain:SentenceLabels",
    "spans": "capaudit.io.labels.plain:SpanLabels",
    "tokens": "capaudit.io.labels.tokens:TokenLabels",
    "yes-no": "capaudit.io.labels.yesno:YesNoLabels",
    "graded": "capaudit.io.labels.graded:GradedLabels",
    "faithscore": "capaudit.io.labels.faithscore:FaithScoreLabels",
}.items():
    LABEL_LAYOUTS.register(_name, _target, version="1")
