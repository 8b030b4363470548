"""A support value that names the evidence that gave it, for the sentence's log.

Why its own module: the reference evidence (:mod:`.reference_evidence`) and the instance
counts (:mod:`.instance_counts`) both give such values, and the evidence loader
(:mod:`.evidence`), which the reference evidence reads, builds the latter."""

from __future__ import annotations

__all__ = ["Scored"]


class Scored(float):
    """A support value that names its evidence (``by``); compares as the float it is."""

    by: str = ""

    def __new__(cls, value: float, by: str):
        obj = super().__new__(cls, value)
        obj.by = by
        return obj
