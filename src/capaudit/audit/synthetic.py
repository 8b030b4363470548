"""ShareGPT4V-length captions built from real COCO human captions, for load tests.

Enriched caption sets run to ~170 tokens; joining consecutive human captions
(of other images) until that length gives text with the same vocabulary and
punctuation as real captions, deterministically, without any model. The
audit benchmark and the streaming tests use the same generator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


def long_captions(coco_captions_json: str | Path, n: int,
                  target_tokens: int = 170) -> Iterator[tuple[int, str]]:
    """Yield ``(image_id, caption)`` pairs of about ``target_tokens`` whitespace tokens.

    Every caption is distinct (the engine analyses identical captions once, which would
    flatter a benchmark): caption ``i`` starts at human caption ``i * 7919 mod m`` and walks
    with stride ``1 + i // m``, so a new pass over the ``m`` human captions joins them
    differently.
    """
    data = json.loads(Path(coco_captions_json).read_text("utf-8"))
    caps = [a["caption"].strip() for a in data["annotations"]]
    ids = [a["image_id"] for a in data["annotations"]]
    lens = [len(c.split()) + 1 for c in caps]
    m = len(caps)
    for i in range(n):
        j = (i * 7919) % m
        step = 1 + i // m
        parts, tok = [], 0
        while tok < target_tokens:
            parts.append(caps[j] if caps[j].endswith(".") else caps[j] + ".")
            tok += lens[j]
            j = (j + step) % m
        yield ids[(i * 7919) % m], " ".join(parts)
