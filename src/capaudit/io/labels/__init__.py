"""Human hallucination labels in the layouts people publish (``filter validate``):
:mod:`capaudit.io.labels.base` holds the registry and the record reader."""

from capaudit.io.labels.base import LABEL_LAYOUTS, Labelled, read_labels

__all__ = ["LABEL_LAYOUTS", "Labelled", "read_labels"]
