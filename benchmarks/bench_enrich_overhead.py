"""Pipeline overhead per sample: `run_enrich` versus raw backend calls.

Why: the shard machinery (tar reading, prompt rendering, JSONL writing,
atomic renames, markers, provenance) must cost little next to a model call.
Both sides talk to the same loopback OpenAI-compatible server (no model, no
cache), so the difference per sample is our overhead.

    python benchmarks/bench_enrich_overhead.py --samples 200 --shard-size 50
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--shard-size", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()

    import pyarrow as pa
    from PIL import Image

    from capaudit.core.config import resolve
    from capaudit.enrich.adapters.base import load_prompt
    from capaudit.llm import GenRequest, make_backend
    from capaudit.enrich.runner import DEFAULTS, run_enrich
    from capaudit.enrich.testing import FakeOpenAIServer
    from capaudit.io.image_shards import build_shards, list_shards, read_shard

    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer() as srv:
        tmp = Path(tmp)
        (tmp / "img").mkdir()
        ids = list(range(1, args.samples + 1))
        for i in ids:
            Image.new("RGB", (64, 64), (i % 255, 80, 160)).save(tmp / "img" / f"{i:012d}.jpg")
        table = pa.table({"image_key": [str(i) for i in ids], "image_id": pa.array(ids, pa.int64()),
                          "caption": [f"caption {i}" for i in ids]})
        build_shards(tmp / "img", table, tmp / "shards", shard_size=args.shard_size)
        opts = {"base_url": srv.base_url, "concurrency": args.concurrency}
        cfg = resolve(DEFAULTS, None, {"llm": {"backend": "openai", "model": "m", "options": opts}})
        cfg["batch_size"] = 32

        # raw: the same requests straight to the backend, images already in memory
        samples = [s for t in list_shards(tmp / "shards") for s in read_shard(t)]
        prompt = load_prompt("sharegpt4v")
        backend = make_backend("openai", {"model": "m", **opts})
        reqs = [GenRequest(prompt, image=s.image) for s in samples]
        t0 = time.perf_counter()
        for start in range(0, len(reqs), 32):
            backend.generate(reqs[start:start + 32])
        raw = time.perf_counter() - t0

        t0 = time.perf_counter()
        summary = run_enrich(tmp / "shards", tmp / "work", "sharegpt4v", cfg)
        pipe = time.perf_counter() - t0
    n = len(samples)
    print(f"{n} samples, {summary['shards_run']} shards,"
          f" concurrency {args.concurrency}")
    print(f"raw backend calls: {raw:.2f}s ({raw / n * 1000:.2f} ms/sample)")
    print(f"run_enrich:        {pipe:.2f}s ({pipe / n * 1000:.2f} ms/sample)")
    print(f"overhead:          {(pipe - raw) / n * 1000:.2f} ms/sample "
          f"({(pipe / raw - 1) * 100:.0f}% of raw)")


if __name__ == "__main__":
    main()
