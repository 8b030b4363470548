"""Filters and mitigation: each scores, then decides, and logs what it removed or changed.

See :mod:`capaudit.filters.base` for the protocol and the registry
(:data:`~capaudit.filters.base.FILTERS`), :mod:`capaudit.filters.runner` for
running one over a stored set, and :mod:`capaudit.filters.review` for the
human review round trip.

``FILTERS`` is looked up on first use (PEP 562), so the CLI can read the light
:mod:`capaudit.filters.declared` at start-up without importing the protocol
and its text helpers.
"""

__all__ = ["FILTERS"]


def __getattr__(name: str):
    if name == "FILTERS":
        from capaudit.filters.base import FILTERS

        return FILTERS
    raise AttributeError(f"module 'capaudit.filters' has no attribute {name!r}")
