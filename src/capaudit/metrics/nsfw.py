"""``nsfw_words``: percent of captions containing a word or phrase of the NSFW lexicon.

Whole-word and whole-phrase, case-insensitive (:mod:`capaudit.metrics.features.nsfw`):
"Scunthorpe", "cocktail" and "assess" are not hits; an entry the lexicon marks as needing
context ("girl on", "tied up") counts only in it, and is otherwise set aside. Lower is
better. The hits of each caption go to the ``nsfw_hits`` detail column; the value's extra
holds every entry matched with its count (``entries``) and the entries set aside
(``set_aside``), so a reviewer reads what was counted.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from capaudit.metrics.base import register_metric
from capaudit.metrics.per_caption import PerCaptionMean
from capaudit.metrics.features.inputs import lotus_of

__all__ = ["NsfwWords", "hits_text"]


@register_metric
class NsfwWords(PerCaptionMean):
    name, label = "nsfw_words", "NSFW %"
    description = ("captions with a word or phrase of the NSFW lexicon (LDNOOBW English, "
                   "ambiguous phrases only in context) (×100)")
    direction, criterion = -1, "side_effects"
    default = False
    scale = 100.0
    details = {"nsfw_hits": pa.list_(pa.string())}

    def values(self, ctx):
        return np.array([bool(h) for h in lotus_of(ctx).nsfw], np.float64)

    def totals(self, ctx):
        hits, aside = lotus_of(ctx).nsfw_scan
        return {"hits": int(sum(len(h) for h in hits)),
                "entries": dict(Counter(e for h in hits for e in h)),
                "set_aside": dict(Counter(e for a in aside for e in a))}

    def caption_details(self, ctx):
        return {"nsfw_hits": pa.array(lotus_of(ctx).nsfw, pa.list_(pa.string()))}


def hits_text(extra: dict | None, limit: int = 5) -> str:
    """``hits: nude ×2; set aside, no context: tied up ×3``: the entries behind an
    ``nsfw_words`` value (most frequent first, ``limit`` each), "" when there are none."""
    parts = []
    for key, head in (("entries", "hits"), ("set_aside", "set aside, no context")):
        counts = sorted((extra or {}).get(key, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        if counts:
            more = f", +{len(counts) - limit} more" if len(counts) > limit else ""
            parts.append(f"{head}: " + ", ".join(f"{e} ×{n}" for e, n in counts[:limit]) + more)
    return "; ".join(parts)
