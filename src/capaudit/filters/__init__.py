"""Filters and mitigation: each scores, then decides, and logs what it removed or changed.

See :mod:`capaudit.filters.base` for the protocol and the registry
(:data:`~capaudit.filters.base.FILTERS`), :mod:`capaudit.filters.runner` for
running one over a stored set, and :mod:`capaudit.filters.review` for the
human review round trip.
"""

from capaudit.filters.base import FILTERS

__all__ = ["FILTERS"]
