"""The plain label layouts (JSON Lines or CSV, joined to a set by ``image_id`` and caption):

- ``caption-label``: ``{"image_id", "caption", "label"}``, 1 = the caption holds a
  hallucination;
- ``sentence-label``: ``{"image_id", "caption", "sentence", "label"}``, one row per labelled
  sentence (rows of one caption are merged);
- ``spans``: ``{"image_id", "caption", "spans": [[start, end], ...]}``, character offsets
  (end exclusive) of the hallucinated text; a sentence is hallucinated when it overlaps one.
"""

from __future__ import annotations

from capaudit.errors import InputError
from capaudit.io.labels.base import LabelLayout, Labelled, binary, json_field, text_field

__all__ = ["CaptionLabels", "SentenceLabels", "SpanLabels", "checked_spans"]

class CaptionLabels(LabelLayout):
    """One 0/1 per caption."""

    name = "caption-label"
    fields = ("image_id", "caption", "label")

    @classmethod
    def sniff(cls, keys: set[str]) -> bool:
        return super().sniff(keys) and not keys & {"sentence", "spans", "tokens"}

    def parse(self, rec: dict, row: int, path) -> Labelled:
        return Labelled(row, text_field(rec, "image_id", row, path),
                        text_field(rec, "caption", row, path),
                        label=binary(rec.get("label"), row, path))


class SentenceLabels(LabelLayout):
    """One 0/1 per sentence; a caption's rows are merged into one labelled caption."""

    name = "sentence-label"
    fields = ("image_id", "caption", "sentence", "label")
    levels = ("caption", "sentence")
    repeats = "merge"

    def parse(self, rec: dict, row: int, path) -> Labelled:
        sentence = text_field(rec, "sentence", row, path)
        return Labelled(row, text_field(rec, "image_id", row, path),
                        text_field(rec, "caption", row, path),
                        sentences=[(sentence, binary(rec.get("label"), row, path))])


def checked_spans(spans, caption: str, row: int, path, key: str = "spans") -> list:
    """``[(start, end), ...]``, each inside the caption and not empty."""
    out = []
    for s in spans:
        if not (isinstance(s, (list, tuple)) and len(s) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in s)):
            raise InputError(f"'{key}' holds {str(s)[:40]}, not [start, end]", path=path,
                             row=row, fix="write each span as [start, end] character offsets")
        a, b = s
        if not 0 <= a < b:
            raise InputError(f"span [{a}, {b}] is empty or negative", path=path, row=row,
                             fix="start < end, both >= 0 (end exclusive)")
        if b > len(caption):
            raise InputError(f"span [{a}, {b}] runs past the end of the caption "
                             f"({len(caption)} characters)", path=path, row=row,
                             fix="offsets count characters of 'caption', end exclusive")
        out.append((a, b))
    return out


class SpanLabels(LabelLayout):
    """Hallucinated character spans per caption (an empty list: a faithful caption)."""

    name = "spans"
    fields = ("image_id", "caption", "spans")
    levels = ("caption", "sentence")

    def parse(self, rec: dict, row: int, path) -> Labelled:
        caption = text_field(rec, "caption", row, path)
        spans = checked_spans(json_field(rec, "spans", row, path), caption, row, path)
        return Labelled(row, text_field(rec, "image_id", row, path), caption, spans=spans)
