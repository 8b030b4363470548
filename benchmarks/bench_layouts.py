"""Each layout's reader and writer alone: CPU-seconds to read a shard's captions (the sharded
audit's path) and to write a shard back unchanged (the sharded filter's path), per layout.

    PYTHONPATH=src python benchmarks/bench_layouts.py [--samples 20000] [--repeat 3]

The data: ``--samples`` webdataset samples (``KEY.jpg`` of 3 kB, ``KEY.txt``, ``KEY.json``),
the same captions as a parquet shard (row groups of 8,192) and an Arrow IPC stream, JSONL
lines of ``{"image_id", "caption"}``. Each measure is the process CPU time (user + system) of
one pass, the best of ``--repeat``; prints one JSON line.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import tarfile
import tempfile
from pathlib import Path


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def build(folder: Path, n: int) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    caps = [f"A photo of thing {i} on a table next to a window." for i in range(n)]
    tar = folder / "s.tar"
    with tarfile.open(tar, "w") as tf:
        for i, cap in enumerate(caps):
            for ext, data in (("jpg", bytes(range(256)) * 12), ("txt", cap.encode()),
                              ("json", json.dumps({"image_id": i + 1}).encode())):
                info = tarfile.TarInfo(f"{i:09d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    table = pa.table({"image_id": list(range(1, n + 1)), "caption": caps})
    pq.write_table(table, folder / "s.parquet", row_group_size=8192)
    with pa.OSFile(str(folder / "s.arrow"), "wb") as sink, \
            pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=8192)
    (folder / "s.jsonl").write_text("".join(json.dumps({"image_id": i + 1, "caption": c}) + "\n"
                                            for i, c in enumerate(caps)))
    return {"tar": tar, "parquet": folder / "s.parquet", "arrow": folder / "s.arrow",
            "jsonl": folder / "s.jsonl"}


def read_rows(path: Path) -> int:
    from capaudit.io.caption_shards import iter_shard_rows

    return sum(1 for _ in iter_shard_rows(path))


def rewrite(path: Path, fmt: str) -> int:
    from capaudit.io.rewrite.base import ChangeLog
    from capaudit.io.rewrite.formats import open_rewriter

    with open(path, "rb") as src, open(path.with_suffix(".out"), "wb") as out:
        w = open_rewriter(fmt, {}, io.BufferedReader(src), out, str(path), ChangeLog())
        n = 0
        for batch in w.batches():
            w.write(batch, {})
            n += len(batch)
        w.finish()
    return n


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = _cpu()
        fn()
        times.append(_cpu() - t)
    return round(min(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp), args.samples)
        out = {"samples": args.samples}
        for name in ("tar", "parquet", "arrow"):
            out[f"read_{name}_cpu_s"] = best(lambda: read_rows(files[name]), args.repeat)
        for name, fmt in (("tar", "webdataset"), ("parquet", "parquet-shard"),
                          ("jsonl", "jsonl")):
            out[f"rewrite_{name}_cpu_s"] = best(lambda: rewrite(files[name], fmt), args.repeat)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
