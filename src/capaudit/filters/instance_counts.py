"""Instance counts as hallucination evidence: "two dogs" where the image holds one dog.

Why: a COCO instances JSON (``--evidence instances --instances instances_val2014.json``)
has one annotation per instance, so it says how many dogs an image holds, not only that it
holds dogs. A number the sentence attaches to a supported object
(:func:`capaudit.text.attributes.attached`: an explicit number word or numeral; ``a``/``an``
are no count, as for the references) that differs from the image's number of instances of
that category makes the object unsupported, logged as the references' count is, the
sentence's number first: ``instances: 2 against 1 (count)`` for "two dogs" beside one dog. The
number is exact only without crowd regions: a category with an ``iscrowd`` annotation (a
crowd of people drawn as one region) has no exact count, and a number stated for it decides
nothing (:func:`capaudit.io.annotation_files.load_instances` with ``exact``). A file without instances
(a JSONL of categories, a stored source) gives no counts: its run decides as before.
"""

from __future__ import annotations

from capaudit.filters.scored import Scored

__all__ = ["Counted"]


class Counted(dict):
    """One image's ``{category: support}`` with its exact instance counts, which
    :meth:`contradicted` (the hook the filter's mention scan calls) holds stated numbers to."""

    def __init__(self, scores: dict, counts: dict):
        super().__init__(scores)
        self.counts = counts

    def contradicted(self, category: str, tokens: list[str], index: int, support):
        """``support``, or 0 when the image holds an exact number of ``category``
        (``counts``) and the sentence's mention at ``index`` states another."""
        exact = self.counts.get(category)
        if exact is None or support is None or not support:
            return support
        from capaudit.text.attributes import attached

        said = attached(tokens, index).count
        if said is None or said == exact:
            return support
        return Scored(0.0, f"instances: {said} against {exact} (count)")   # as the references'
