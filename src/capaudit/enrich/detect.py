"""Detection alone (``capaudit detect``): records of category, score, box, colour.

Why a generator: a million-image shard folder streams through one record at
a time; the CLI writes JSONL as it goes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from capaudit.enrich.colors import dominant_color
from capaudit.enrich.detectors import make_detector
from capaudit.enrich.detectors.base import decode_image
from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id


def _inputs(images, shards) -> Iterator[tuple[str, int | None, bytes]]:
    if shards:
        from capaudit.io.image_shards import list_shards, read_shard

        for shard in list_shards(shards):
            for s in read_shard(shard):
                if s.image is not None:
                    yield s.key, s.image_id, s.image
    for p in images or []:
        p = Path(p)
        if not p.is_file():
            raise InputError("image not found", path=p)
        yield p.name, parse_image_id(p.name), p.read_bytes()


def detect_records(name: str, options: dict, *, images=None, shards=None,
                   colors: bool = True) -> Iterator[dict]:
    det = make_detector(name, options)
    for key, iid, data in _inputs(images, shards):
        try:
            img = decode_image(data)
        except Exception as exc:
            yield {"key": key, "image_id": iid, "detections": [],
                   "error": f"cannot decode image ({exc.__class__.__name__})"}
            continue
        dets = []
        for d in det.detect([img], [iid])[0]:
            rec = d.to_dict()
            if colors and d.box is not None:
                rec["color"] = dominant_color(img, d.box)
            dets.append(rec)
        yield {"key": key, "image_id": iid, "detector": det.model_id, "detections": dets}
