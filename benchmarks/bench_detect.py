"""Detector throughput on CPU: images/s and peak memory.

Why: the default detector must be cheap enough to tag a million images on a
laptop. Runs the shipped SSD-MobileNet (ai-edge-litert) on the scikit-image
photographs (astronaut, chelsea, coffee, ...), full decode-resize-infer path
as enrichment uses it, plus the colour-naming step.

    python benchmarks/bench_detect.py --repeat 20 --threads 1
"""

from __future__ import annotations

import argparse
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20, help="passes over the photos")
    ap.add_argument("--threads", type=int, default=1, help="litert CPU threads")
    ap.add_argument("--detector", default="ssd-mobilenet")
    args = ap.parse_args()

    from PIL import Image
    from skimage import data

    from capaudit.enrich.colors import dominant_color
    from capaudit.enrich.detectors import make_detector

    photos = [Image.fromarray(getattr(data, n)()).convert("RGB")
              for n in ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field")]
    det = make_detector(args.detector, {"num_threads": args.threads})
    det.detect(photos[:1], [None])  # warm-up
    n, t0 = 0, time.perf_counter()
    for _ in range(args.repeat):
        det.detect(photos, [None] * len(photos))
        n += len(photos)
    t_det = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        for img, dets in zip(photos, det.detect(photos, [None] * len(photos))):
            [dominant_color(img, d.box) for d in dets]
    t_all = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"detector {args.detector} threads={args.threads}: {n} images, "
          f"{n / t_det:.1f} images/s detect only, {n / t_all:.1f} images/s with colours, "
          f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
