"""Sources written back in their own layout, record by record (:mod:`.base`): one writer per
format, shared by ``sets export --to original`` and ``filter run --shards``."""

from capaudit.io.rewrite.base import ChangeLog
from capaudit.io.rewrite.formats import open_rewriter

__all__ = ["ChangeLog", "open_rewriter"]
