"""The embedded DuckDB store: caption sets, captions, annotations, runs, metrics."""

from capaudit.store.db import DEFAULT_DB, Store
from capaudit.store.sets import SetInfo

__all__ = ["DEFAULT_DB", "SetInfo", "Store"]
