"""Dominant colour name of a box (FuseCap-style attributes).

Why names, not RGB: the fusion prompt is text ("a red car"), and the audit
counts words. The box's central region (the outer 15% is mostly background)
is reduced to 24x24 pixels, each pixel gets a basic colour name from simple
HSV rules (achromatic first: black/white/gray by value and saturation, then
hue bands), and the most frequent name wins. Crude but deterministic, cheap,
and easy to reason about; a better attribute model can replace it.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

HUES = [(15, "red"), (40, "orange"), (70, "yellow"), (165, "green"), (195, "cyan"),
        (255, "blue"), (290, "purple"), (335, "pink"), (360, "red")]


def pixel_names(rgb: np.ndarray) -> list[str]:
    """Basic colour name per pixel of an (N, 3) uint8 array."""
    x = rgb.astype(np.float32) / 255.0
    mx, mn = x.max(axis=1), x.min(axis=1)
    delta = mx - mn
    sat = np.where(mx > 0, delta / np.maximum(mx, 1e-6), 0)
    r, g, b = x[:, 0], x[:, 1], x[:, 2]
    safe = np.maximum(delta, 1e-6)
    hue = np.where(mx == r, ((g - b) / safe) % 6,
                   np.where(mx == g, (b - r) / safe + 2, (r - g) / safe + 4)) * 60.0
    names = []
    for v, s, h in zip(mx, sat, hue):
        if v < 0.2:
            names.append("black")
        elif s < 0.18:
            names.append("white" if v > 0.8 else "gray")
        elif 15 <= h < 45 and v < 0.6:
            names.append("brown")
        else:
            names.append(next(n for limit, n in HUES if h < limit))
    return names


def dominant_color(image, box=None, margin: float = 0.15) -> str | None:
    """Most frequent colour name inside ``box`` (pixels, x0 y0 x1 y1) of a PIL image."""
    w, h = image.size
    x0, y0, x1, y1 = box if box is not None else (0, 0, w, h)
    dx, dy = (x1 - x0) * margin, (y1 - y0) * margin
    crop = (int(max(0, x0 + dx)), int(max(0, y0 + dy)), int(min(w, x1 - dx)), int(min(h, y1 - dy)))
    if crop[2] - crop[0] < 2 or crop[3] - crop[1] < 2:
        return None
    small = image.convert("RGB").crop(crop).resize((24, 24))
    counts = Counter(pixel_names(np.asarray(small).reshape(-1, 3)))
    return counts.most_common(1)[0][0]
