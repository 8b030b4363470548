"""Sources written back in their own layout, record by record (:mod:`.base`): one writer per
format, shared by ``sets export --to original`` and ``filter run --shards``."""

from capaudit.io.rewrite.base import ChangeLog, Place, Record, Rewriter, caption_edits
from capaudit.io.rewrite.formats import REWRITE_FORMATS, open_rewriter

__all__ = ["ChangeLog", "Place", "Record", "Rewriter", "caption_edits", "open_rewriter",
           "REWRITE_FORMATS"]
