"""``yes-no``: one yes/no per caption, ``{"image_id", "caption", "hallucinated": yes/no}``
(also true/false, 1/0), or FOIL's annotation records ``{"image_id", "caption", "foil":
true/false, ...}`` (a foil caption has one word replaced by a wrong object: a
hallucination), read from its JSON file's ``annotations`` list.
"""

from __future__ import annotations

from capaudit.io.labels.base import LabelLayout, Labelled, binary, text_field

__all__ = ["YesNoLabels"]

KEYS = ("hallucinated", "foil")


class YesNoLabels(LabelLayout):
    """Yes = the caption holds a hallucination."""

    name = "yes-no"
    expects = "image_id, caption, hallucinated (or FOIL's foil)"

    @classmethod
    def sniff(cls, keys: set[str]) -> bool:
        return {"image_id", "caption"} <= keys and len(keys & set(KEYS)) == 1

    def parse(self, rec: dict, row: int, path) -> Labelled:
        key = next((k for k in KEYS if k in rec), KEYS[0])
        return Labelled(row, text_field(rec, "image_id", row, path),
                        text_field(rec, "caption", row, path),
                        label=binary(rec.get(key), row, path, key))
