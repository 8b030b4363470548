"""The embedded DuckDB store: caption sets, captions, annotations, runs, metrics."""

from capaudit.store.db import DEFAULT_DB, SetInfo, Store

__all__ = ["DEFAULT_DB", "SetInfo", "Store"]
