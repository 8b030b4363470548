"""``graded``: a graded score per caption, ``{"image_id", "caption", "grade": 1-5}`` (or
``"rating"``), higher = more faithful, as human-judgement sets publish them. There is no
hallucinated/faithful cut: the validation reports the Spearman correlation between the
share of each caption the filter removes (or flags) and the grade (expected negative).
"""

from __future__ import annotations

import math

from capaudit.errors import InputError
from capaudit.io.labels.base import LabelLayout, Labelled, text_field

__all__ = ["GradedLabels"]


class GradedLabels(LabelLayout):
    """A number per caption (1-5)."""

    name = "graded"
    fields, one_of = ("image_id", "caption"), ("grade", "rating")
    expects = "image_id, caption, grade (or rating)"
    levels = ("graded",)

    def parse(self, rec: dict, row: int, path) -> Labelled:
        key = self.label_key(rec)
        try:
            grade = float(rec.get(key))
        except (TypeError, ValueError):
            grade = math.nan
        if not math.isfinite(grade):
            raise InputError(f"'{key}' is {str(rec.get(key))[:30]!r}, not a number", path=path,
                             row=row, fix=f"write '{key}' as a number (1-5)")
        return Labelled(row, text_field(rec, "image_id", row, path),
                        text_field(rec, "caption", row, path), grade=grade)
