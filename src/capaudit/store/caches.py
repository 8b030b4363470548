"""Content-keyed caches in the store: spaCy parse features and CLIP image embeddings.

Why in the store: a rerun of the LOTUS metrics on the same captions (another
reference set, another profile, the leaderboard after ``audit run``) must not
parse 100k captions again, and an image is embedded once per model whatever
set it appears in. Keys are content hashes, so a cache row is valid for any set
holding the same text or image. Lookups and inserts are one bulk statement each
(an Arrow table registered with DuckDB), not a query per caption.

Callers write caches outside a command's result transaction (as the LIC cache
is): a cache row is correct on its own, so an interrupted run keeps what it
computed and stores no partial *results*.
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from capaudit.store.arrow_scan import ARROW, execute_on

__all__ = ["get_parses", "put_parses", "get_embeddings", "put_embeddings"]


def _lookup(store, query: str, keys: pa.Table, params: list | None = None) -> list[tuple]:
    return execute_on(store.con, query, keys, params).fetchall()


def get_parses(store, keys: Sequence[str]) -> dict[str, dict]:
    """``{key: features}`` of the keys present."""
    if store is None or not keys:
        return {}
    rows = _lookup(store, f"SELECT p.key, p.features FROM {ARROW} k JOIN parse_cache p "
                          "ON p.key = k.key", pa.table({"key": pa.array(list(keys), pa.string())}))
    return {k: json.loads(v) for k, v in rows}


def put_parses(store, features: Mapping[str, Mapping]) -> None:
    if store is None or not features:
        return
    tbl = pa.table({"key": list(features), "features": [json.dumps(v) for v in features.values()]})
    execute_on(store.con, f"INSERT OR IGNORE INTO parse_cache SELECT key, features FROM {ARROW}",
               tbl)


def get_embeddings(store, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
    """``{image sha256: float32 embedding}`` of the images already embedded by ``model``."""
    if store is None or not hashes:
        return {}
    rows = _lookup(store, f"SELECT e.image_sha256, e.embedding FROM {ARROW} k JOIN "
                          "image_embeddings e ON e.image_sha256 = k.key WHERE e.model = ?",
                   pa.table({"key": pa.array(list(hashes), pa.string())}), [model])
    return {h: np.asarray(v, np.float32) for h, v in rows}


def put_embeddings(store, model: str, embeddings: Mapping[str, np.ndarray]) -> None:
    if store is None or not embeddings:
        return
    tbl = pa.table({"model": [model] * len(embeddings), "image_sha256": list(embeddings),
                    "embedding": [np.asarray(v, np.float32).tolist() for v in embeddings.values()]})
    execute_on(store.con, "INSERT OR IGNORE INTO image_embeddings "
                          f"SELECT model, image_sha256, embedding FROM {ARROW}", tbl)
