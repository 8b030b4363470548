"""The shard function of ``enrich`` and its step of the runner (:mod:`capaudit.runner`).

Why this shape: ``process_shard`` is a pure function of (shard, config): it
builds the worker context once per process, processes the shard, writes
``shard-N.jsonl`` under a temporary name, renames it, and only then writes
the completion marker (counts, backend counters, failures, config hash). Any
executor can run it; a killed run leaves at most a ``*.tmp-PID`` file, which
the next run deletes, and the shards without a matching marker are redone.
Shards whose marker lists failures are retried on a rerun (successful
samples come from the response cache and cost nothing).

The step's merge (:class:`EnrichStep`) then reads the outputs in shard order, so the
assembled table is identical whatever executor or worker count produced it.

Shards and the work folder may be URLs (``--shards s3://bucket/shards/``, ``--work-dir
s3://bucket/enrich``): a task reads its tar streaming and writes its output and marker
through :class:`capaudit.core.storage.folder.Folder` (an upload committed only when whole), so a
Ray cluster without a shared disk works with a URL work folder (a local one is refused
there, :func:`capaudit.executors.base.require_shared`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa

from capaudit.enrich.adapters.base import ADAPTERS, Context, load_prompt, prompt_hash
from capaudit.llm.base import Stats, make_backend
from capaudit.core.ranges import check_number
from capaudit.errors import InputError
from capaudit.io.image_shards import list_shards, read_shard
from capaudit.io.markers import as_folder, clean_tmp, config_hash, input_fingerprint, read_marker
from capaudit.runner.step import Step, once_per_worker

DEFAULTS: dict = {
    "llm": {"backend": "openai", "model": "", "options": {}, "params": {}},
    "captioner": {"backend": None, "model": None, "options": {}, "params": {}},
    "detector": {"name": "ssd-mobilenet", "options": {}},
    "colors": True,
    "ocr": None,
    "captions": "first",
    "prompts": {},
    "batch_size": 16,
}


@dataclass(frozen=True)
class ShardTask:
    shard: str          # path of the input .tar
    out_dir: str
    adapter: str
    config: dict
    cfg_hash: str
    cache_path: str | None
    input_fp: dict | None = None   # the last marker's fingerprint of this shard (hash reuse)


def output_name(shard: str) -> str:
    from capaudit.core.storage.urls import name_of

    return Path(name_of(shard)).stem + ".jsonl"


def build_context(adapter_name: str, config: dict, cache_path: str | None) -> Context:
    adapter = ADAPTERS.get(adapter_name)
    llm_cfg = config["llm"]
    llm = make_backend(llm_cfg["backend"], {"model": llm_cfg.get("model") or "",
                                            "params": llm_cfg.get("params") or {},
                                            **(llm_cfg.get("options") or {})}, cache_path)
    ctx = Context(llm=llm, colors=bool(config.get("colors", True)),
                  captions=config.get("captions", "first"),
                  prompts={p: load_prompt(p, (config.get("prompts") or {}).get(p))
                           for p in adapter.prompts})
    if adapter.needs_captioner:
        cap = config.get("captioner") or {}
        if cap.get("backend") or cap.get("model"):
            ctx.captioner = make_backend(cap.get("backend") or llm_cfg["backend"], {
                "model": cap.get("model") or llm_cfg.get("model") or "",
                "params": cap.get("params") or llm_cfg.get("params") or {},
                **(cap.get("options") or llm_cfg.get("options") or {})}, cache_path)
    if adapter.needs_detector:
        from capaudit.enrich.detectors import make_detector

        det = config["detector"]
        ctx.detector = make_detector(det["name"], det.get("options") or {})
        if config.get("ocr"):
            from capaudit.enrich.ocr import OCR

            ctx.ocr = OCR.get(config["ocr"])()
    return ctx


def _context(task: ShardTask) -> Context:
    """Models load once per worker (another cache file is another context)."""
    return once_per_worker(("enrich", task.cfg_hash, task.cache_path),
                           lambda: build_context(task.adapter, task.config, task.cache_path))


def _snapshot(ctx: Context) -> dict:
    total = Stats()
    for b in {id(x): x for x in (ctx.llm, ctx.captioner) if x is not None}.values():
        total.add(b.stats)
    return dict(total.__dict__)


def process_shard(task: ShardTask) -> dict:
    """Enrich one shard; returns its marker (counts, counters, failures)."""
    from capaudit.io.markers import write_marker

    t0 = time.perf_counter()
    ctx = _context(task)
    adapter = ADAPTERS.get(task.adapter)()
    before = _snapshot(ctx)
    from capaudit.core.storage.urls import name_of

    fp = input_fingerprint(task.shard, task.input_fp)
    samples = list(read_shard(task.shard))
    rows: list[dict] = []
    bs = max(1, int(task.config.get("batch_size", 16)))
    for start in range(0, len(samples), bs):
        rows.extend(adapter.process(samples[start:start + bs], ctx))
    ok = [r for r in rows if r["error"] is None and r["caption"]]
    failures = [{"key": r["key"], "image_id": r["image_id"],
                 "error": r["error"] or "empty caption"} for r in rows if r not in ok]
    lines = [json.dumps({"key": r["key"], "image_id": r["image_id"], "caption": r["caption"],
                         "meta": {**r["meta"], "shard": name_of(task.shard)}},
                        sort_keys=True, default=str) for r in ok]
    out_dir = as_folder(task.out_dir)
    out_dir.write_bytes(output_name(task.shard),
                        ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
    after = _snapshot(ctx)
    stats = {k: after[k] - before[k] for k in after}
    counts = {"samples": len(samples), "outputs": len(ok), "failures": failures,
              "stats": stats, "seconds": time.perf_counter() - t0, "input": fp}
    write_marker(out_dir, name_of(task.shard), task.cfg_hash, counts)
    return {"shard": name_of(task.shard), **counts}


def effective_hash(adapter: str, config: dict) -> str:
    """Hash of everything that changes outputs: adapter, config and prompt texts."""
    prompts = {p: prompt_hash(load_prompt(p, (config.get("prompts") or {}).get(p)))
               for p in ADAPTERS.get(adapter).prompts}
    keep = {k: v for k, v in config.items() if k not in ("batch_size",)}
    return config_hash({"adapter": adapter, "config": keep, "prompts": prompts})


def collect(out_dir, shard_names: list[str]) -> pa.Table:
    """Assemble the outputs in shard order (identical across executors)."""
    keys, ids, caps, metas = [], [], [], []
    folder = as_folder(out_dir)
    for name in shard_names:
        data = folder.read_bytes(output_name(name))
        if data is None:
            raise InputError("a finished shard's output is missing", path=folder.url(
                output_name(name)), fix="rerun: the shard is redone")
        for line in data.decode("utf-8").splitlines():
            rec = json.loads(line)
            keys.append(rec["key"])
            ids.append(rec["image_id"])
            caps.append(rec["caption"])
            metas.append(json.dumps(rec["meta"], sort_keys=True))
    return pa.table({"image_key": pa.array(keys, pa.string()), "image_id": pa.array(ids, pa.int64()),
                     "caption": pa.array(caps, pa.string()), "meta": pa.array(metas, pa.string())})


class EnrichStep(Step):
    """``enrich`` as a step of the runner: the shards not yet done, one task each
    (:func:`process_shard`), their outputs assembled in shard order."""

    passes = (process_shard,)

    def __init__(self, shards_dir, out_dir, adapter: str, config: dict,
                 cache_path: str | None, limit: int | None):
        self.shards_dir, self.out_dir, self.adapter = shards_dir, out_dir, adapter
        self.config, self.cache_path, self.limit = config, cache_path, limit
        self.work_dir = out_dir.location
        self.shared = ((out_dir.location, "work folder", "--work-dir"),)

    def plan(self, root: str, workers: int) -> list[ShardTask]:
        """The shards still to do; a shard is done (its marker in ``self.done``) when its
        marker matches the config hash AND the input shard's content (a rebuilt shard of the
        same name is redone; a remote one: the same size and ETag), lists no failure, and its
        output exists."""
        from capaudit.core.storage.urls import name_of
        from capaudit.io.markers import same_input

        out_dir = self.out_dir.make()
        clean_tmp(out_dir)
        h = self.key = effective_hash(self.adapter, self.config)
        todo, self.done = [], []
        for shard in list_shards(self.shards_dir)[:self.limit]:
            name = name_of(shard)
            marker = read_marker(out_dir, name) or {}
            last_fp = marker.get("input") if isinstance(marker.get("input"), dict) else None
            fp = None
            if marker.get("config_hash") == h and last_fp and not marker.get("failures") \
                    and out_dir.exists(output_name(name)):
                fp = input_fingerprint(shard, last_fp)
                if same_input(last_fp, fp):
                    self.done.append(marker)
                    continue
            todo.append(ShardTask(str(shard), out_dir.location, self.adapter, self.config, h,
                                  self.cache_path, fp or last_fp))
        self.t0 = time.perf_counter()
        return todo

    def merge(self, tasks: list[ShardTask], results: list[dict[int, dict]]) -> dict:
        """The table (shards in name order), this run's failures written to
        ``failures.jsonl``, the counts and the backends' counters."""
        elapsed = time.perf_counter() - self.t0
        ran = [results[0][i] for i in sorted(results[0])]
        names = sorted([m["shard"] for m in self.done] + [r["shard"] for r in ran])
        table = collect(self.out_dir, names)
        failures = [f | {"shard": r["shard"]} for r in ran for f in r["failures"]]
        self.out_dir.write_bytes("failures.jsonl", "".join(
            json.dumps(f, sort_keys=True) + "\n" for f in failures).encode("utf-8"))
        stats = Stats()
        for r in ran:
            stats.add(r["stats"])
        n_samples = sum(r["samples"] for r in ran)
        return {"table": table, "shards_total": len(names),
                "shards_run": len(ran), "shards_skipped": len(self.done), "samples": n_samples,
                "outputs": sum(r["outputs"] for r in ran), "failures": failures,
                "stats": dict(stats.__dict__), "seconds": elapsed,
                "samples_per_s": n_samples / elapsed if elapsed > 0 else 0.0,
                "config_hash": self.key}


def run_enrich(shards_dir: str | Path, out_dir: str | Path, adapter: str, config: dict, *,
               executor: str = "local", workers: int = 1, address: str | None = None,
               cache_path: str | None = None, limit: int | None = None,
               on_shard: Callable[[dict], None] | None = None,
               on_start: Callable[[int, int], None] | None = None) -> dict:
    """Run the adapter over every shard not yet done; returns the summary and the table.

    Holds the work directory (:func:`~capaudit.core.storage.work_folder.work_dir_lock`)
    while it plans, runs, assembles and writes ``failures.jsonl`` (this run's failed samples).
    """
    from capaudit.runner.run import run_step
    from capaudit.runner.step import RunOptions

    if config.get("captions") not in ("first", "all"):
        raise InputError("captions must be 'first' or 'all'")
    check_number("limit", limit, 1, None, optional=True, flag="--limit")  # [:-1] kept all but one
    check_number("workers", workers, 1, 1024, flag="--workers")
    step = EnrichStep(shards_dir, as_folder(out_dir), adapter, config, cache_path, limit)
    return run_step(step, RunOptions(executor, workers, address, False, on_shard, on_start))
