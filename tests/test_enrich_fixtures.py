"""Helpers shared by the shard/enrich/executor tests (no tests here).

Fixtures are built by code: tiny synthetic images with PIL, a COCO-format
captions file, a store with that set registered, shards built from it.
"""

from __future__ import annotations

import json
from pathlib import Path

COLOURS = [(200, 30, 30), (30, 160, 40), (30, 60, 210), (230, 220, 40), (250, 250, 250),
           (20, 20, 20), (150, 80, 200), (240, 140, 20), (90, 90, 90), (40, 200, 200)]


def make_images(folder: Path, n: int, size: int = 32) -> list[int]:
    """``n`` solid-colour JPEGs named like COCO val2014 files; returns their ids."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    ids = []
    for i in range(n):
        iid = 1000 + i
        Image.new("RGB", (size, size), COLOURS[i % len(COLOURS)]).save(
            folder / f"COCO_val2014_{iid:012d}.jpg", quality=90)
        ids.append(iid)
    return ids


def make_captions(path: Path, ids: list[int], per_image: int = 2) -> Path:
    images = [{"id": i, "file_name": f"COCO_val2014_{i:012d}.jpg"} for i in ids]
    anns = [{"id": k * 100 + j, "image_id": i, "caption": f"a thing number {i} view {j}"}
            for k, i in enumerate(ids) for j in range(per_image)]
    path.write_text(json.dumps({"images": images, "annotations": anns}), encoding="utf-8")
    return path


def make_dataset(tmp: Path, n_images: int = 6, shard_size: int = 2, per_image: int = 2):
    """(db path, shards dir, ids): a store with set 'coco' and shards built from it."""
    from capaudit.io.ingest import add_caption_set
    from capaudit.enrich.shards_build import build_shards
    from capaudit.store import Store

    ids = make_images(tmp / "images", n_images)
    caps = make_captions(tmp / "captions.json", ids, per_image)
    db = tmp / "t.duckdb"
    with Store(db) as store:
        add_caption_set(store, "coco", caps, "coco")
        table = store.captions("coco")
    build_shards(tmp / "images", table, tmp / "shards", shard_size=shard_size, set_name="coco")
    return db, tmp / "shards", ids


def base_config(base_url: str | None = None, backend: str = "openai") -> dict:
    from capaudit.core.config import resolve
    from capaudit.enrich.runner import DEFAULTS

    opts = {"base_url": base_url, "concurrency": 2, "max_retries": 2, "backoff_s": 0.01} \
        if backend == "openai" else {}
    return resolve(DEFAULTS, None, {"llm": {"backend": backend, "model": "test-model",
                                            "options": opts}})
