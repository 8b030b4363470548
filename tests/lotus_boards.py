"""A small synthetic leaderboard (three sets that trade descriptiveness for hallucination)
for the leaderboard, page and browser tests; built from per-image statistics, no NLP."""

from __future__ import annotations

import numpy as np

from capaudit.metrics.base import Estimate, ratio
from capaudit.io.annotation_files import Annotations
from capaudit.leaderboard.board import SetEval

N_IMAGES = 40


def per_image(values: np.ndarray, scale: float = 1.0) -> Estimate:
    """Mean of one value per image, as (sum, count) statistics."""
    stats = np.stack([values, np.ones(len(values))], axis=1).astype(np.float64)
    return Estimate(stats, ratio(scale), len(values))


def board_sets(seed: int = 0) -> tuple[list[SetEval], Annotations]:
    rng = np.random.default_rng(seed)
    images = np.arange(1, N_IMAGES + 1)
    sets = []
    # name: (noun precision %, chair_s share, semantic nodes)
    for name, (noun, chair, nodes) in {"A": (80, 0.6, 9), "B": (50, 0.3, 6),
                                       "C": (20, 0.05, 3)}.items():
        est = {"noun_precision": per_image(noun + rng.normal(0, 2, N_IMAGES)),
               "chair_s": per_image((rng.random(N_IMAGES) < chair).astype(float), 100.0),
               "semantic_nodes": per_image(nodes + rng.normal(0, 0.5, N_IMAGES))}
        sets.append(SetEval(name, est, {"clipscore": "no CLIP model (give --clip-model PATH)"},
                            images, N_IMAGES,
                            [{"kind": "chair", "row": 3, "image_id": 4, "count": 2,
                              "words": ["dog", "<b>cat</b>"],
                              "caption": f"set {name}: a dog & a <b>cat</b> </script>"}]))
    ann = Annotations(gender={int(i): ("male" if i % 2 else "female") for i in images})
    return sets, ann
