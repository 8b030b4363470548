"""``yes-no``: one yes/no per caption, ``{"image_id", "caption", "hallucinated": yes/no}``
(also true/false, 1/0), or FOIL's annotation records ``{"image_id", "caption", "foil":
true/false, ...}`` (a foil caption has one word replaced by a wrong object: a
hallucination), read from its JSON file's ``annotations`` list.
"""

from __future__ import annotations

from capaudit.io.labels.base import LabelLayout, Labelled, binary, text_field

__all__ = ["YesNoLabels"]


class YesNoLabels(LabelLayout):
    """Yes = the caption holds a hallucination."""

    name = "yes-no"
    fields, one_of = ("image_id", "caption"), ("hallucinated", "foil")
    expects = "image_id, caption, hallucinated (or FOIL's foil)"

    def parse(self, rec: dict, row: int, path) -> Labelled:
        key = self.label_key(rec)
        return Labelled(row, text_field(rec, "image_id", row, path),
                        text_field(rec, "caption", row, path),
                        label=binary(rec.get(key), row, path, key))
