"""CLI: ``shards build``, ``enrich ADAPTER`` and ``detect``.

Thin wrappers: options are turned into a config (CLI > YAML > defaults), the
plain functions in :mod:`capaudit.enrich.shards_build`, :mod:`capaudit.enrich.runner`
and the detectors do the work, and this module only prints. The enrich
summary always lists failed samples (also written to ``failures.jsonl``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from capaudit.cli.common import (DbOption, console, db_path, deprecated_spelling,
                                 keep_on_interrupt, open_store, progress, recorded_run)
from capaudit.errors import InputError

shards_app = typer.Typer(help="Build and inspect webdataset shards.", no_args_is_help=True)


@shards_app.command("build")
def shards_build(images: Path = typer.Option(..., "--images", help="folder of images (COCO file names)"),
                 captions: str = typer.Option(..., "--captions", help="registered caption set"),
                 out: Path = typer.Option(..., "--out", help="output folder for the shards"),
                 shard_size: int = typer.Option(1000, "--shard-size", min=1),
                 executor: str = typer.Option("local", "--executor", help="local | ray"),
                 workers: int = typer.Option(1, "--workers", min=1),
                 address: Optional[str] = typer.Option(None, "--address", help="Ray address (auto)"),
                 db: Optional[Path] = DbOption):
    """Pair images with a caption set into webdataset tars + parquet indexes."""
    from capaudit.enrich.shards_build import build_shards
    from capaudit.executors.base import check_executor

    check_executor(executor, address)
    with open_store(db, read_only=True) as store:
        table = store.captions(captions, "row_idx, image_key, image_id, caption, namespace")
    keep_on_interrupt(f"finished shards are kept in {out}; rerun the same command to resume")
    with progress() as bar:
        task = bar.add_task("shards", total=None)
        summary = build_shards(images, table, out, shard_size=shard_size, set_name=captions,
                               executor=executor, workers=workers, address=address,
                               on_start=lambda n, w: bar.update(task, total=n),
                               on_shard=lambda s: bar.advance(task))
    console.print(f"{summary['samples']} images in {summary['shards']} shards at {out} "
                  f"({summary['written']} written, {summary['skipped_done']} already done); "
                  f"{summary['unmatched_images']} images had no caption in '{captions}'"
                  + (f"; {summary['removed_stale']} older shard(s) of an earlier build removed"
                     if summary["removed_stale"] else ""), markup=False)


def enrich(adapter: str = typer.Argument(..., help="sharegpt4v | fusecap | capsfusion"),
           shards: str = typer.Option(..., "--shards", help="folder of .tar shards (a path or a "
                                      "URL: s3://, gs://, hf://; a brace list or .txt list)"),
           out: str = typer.Option(..., "--out", help="name of the new caption set"),
           llm: Optional[str] = typer.Option(None, "--llm", help="openai | transformers | echo"),
           model: Optional[str] = typer.Option(None, "--model"),
           base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible /v1 URL"),
           api_key_env: Optional[str] = typer.Option(None, "--api-key-env"),
           concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1),
           max_tokens: Optional[int] = typer.Option(None, "--max-tokens"),
           captioner: Optional[str] = typer.Option(None, "--captioner", help="backend of caption B"),
           captioner_model: Optional[str] = typer.Option(None, "--captioner-model"),
           detector: Optional[str] = typer.Option(None, "--detector"),
           detector_weights: Optional[str] = typer.Option(None, "--detector-weights"),
           annotations: Optional[str] = typer.Option(None, "--annotations",
                                                     help="instances file (annotations detector); "
                                                          "a path or a URL"),
           ocr: Optional[str] = typer.Option(None, "--ocr", help="tesseract (off by default)"),
           captions: Optional[str] = typer.Option(None, "--captions", help="first | all"),
           executor: str = typer.Option("local", "--executor", help="local | ray"),
           workers: int = typer.Option(1, "--workers", min=1),
           address: Optional[str] = typer.Option(None, "--address", help="Ray address (auto)"),
           work_dir: Optional[str] = typer.Option(None, "--work-dir",
                                                  help="shard outputs + markers (default "
                                                  "STORE.work/OUT.enrich-work; a URL such as "
                                                  "s3://BUCKET/PREFIX on a Ray cluster)"),
           cache: Optional[Path] = typer.Option(None, "--cache", help="response cache (sqlite)"),
           config: Optional[Path] = typer.Option(None, "--config", help="YAML, e.g. configs/enrich.yaml"),
           limit: Optional[int] = typer.Option(None, "--limit", min=1, help="first N shards only"),
           replace: bool = typer.Option(False, "--replace"),
           db: Optional[Path] = DbOption):
    """Enrich captions over shards and register the result as a caption set."""
    from capaudit.core.config import resolve, write_provenance
    from capaudit.enrich.adapters import ADAPTERS
    from capaudit.llm.openai import check_api_key_env
    from capaudit.enrich.runner import DEFAULTS, effective_hash, run_enrich
    from capaudit.executors.base import check_executor
    from capaudit.io.image_shards import read_manifest

    ADAPTERS.entry(adapter)
    check_executor(executor, address)
    det_opts = {"weights": detector_weights} if detector_weights else {}
    if annotations:
        det_opts["path"] = annotations
    cfg = resolve(DEFAULTS, config, {
        "llm": {"backend": llm, "model": model, "params": {"max_tokens": max_tokens},
                "options": {"base_url": base_url, "api_key_env": api_key_env,
                            "concurrency": concurrency}},
        "captioner": {"backend": captioner, "model": captioner_model},
        "detector": {"name": detector or ("annotations" if annotations else None),
                     "options": det_opts},
        "ocr": ocr, "captions": captions})
    # a key pasted as the variable's name is refused before it can reach runs/provenance
    check_api_key_env(api_key_env, must_be_set=True)
    for section in ("llm", "captioner"):
        check_api_key_env(((cfg.get(section) or {}).get("options") or {}).get("api_key_env"))
    from capaudit.core.storage.urls import join, local_path, shown_url
    from capaudit.core.storage.work_folder import default_work_dir

    # beside the store (<store>.work/OUT.enrich-work), never the working directory
    work = work_dir or default_work_dir(db_path(db), out, "enrich-work")
    cache_path = str(cache or (local_path(work) or _remote_cache(work)) / "cache.sqlite")
    _check_out_name(db, out, replace, effective_hash(adapter, cfg))
    keep_on_interrupt(f"finished shards are kept in {shown_url(work)}; rerun the same command "
                      "to resume")
    with progress() as bar:
        task = bar.add_task(f"enrich {adapter}", total=None)
        summary = run_enrich(shards, work, adapter, cfg, executor=executor, workers=workers,
                             address=address, cache_path=cache_path, limit=limit,
                             on_start=lambda n, d: bar.update(task, total=n),
                             on_shard=lambda r: bar.advance(task))
    table = summary.pop("table")
    if table.num_rows == 0:
        raise InputError("enrichment produced no caption; every sample failed",
                         path=join(work, "failures.jsonl"))
    info = _register_set(db, out, table, adapter, cfg, summary, shards, work,
                         parent=read_manifest(shards).get("captions_set"))
    write_provenance(join(work, "provenance.json"), {"adapter": adapter, **cfg})
    _print_summary(summary, info, work)


def _remote_cache(work: str) -> Path:
    """The response cache (SQLite, a local file) of a run whose work folder is a URL: in the
    user cache folder, one per work folder."""
    import hashlib

    from capaudit.core.config import user_cache_dir

    return user_cache_dir() / "enrich" / hashlib.sha256(work.encode()).hexdigest()[:16]


def _check_out_name(db: Optional[Path], out: str, replace: bool, cfg_hash: str) -> None:
    """Refuse an existing set name before any work (no DB lock is held while the models run:
    they may take days); the same enrichment again resumes."""
    with open_store(db, create=True) as store:
        existing = store.find_set(out)
    if existing is not None and not replace and existing.meta.get("config_hash") != cfg_hash:
        raise InputError(f"a caption set named '{out}' already exists",
                         fix="choose another --out or pass --replace")


def _register_set(db: Optional[Path], out: str, table, adapter: str, cfg: dict, summary: dict,
                  shards: str, work, parent: Optional[str]):
    """Register the enriched captions as set ``out`` (``parent``: the shards' caption set), in
    a recorded run; returns its SetInfo."""
    from capaudit.core.storage.urls import is_url, shown_url

    with open_store(db, create=True) as store, recorded_run(store, {"adapter": adapter, **cfg}) as run_id:
        meta = {"adapter": adapter, "config_hash": summary["config_hash"], "run_id": run_id,
                "work_dir": shown_url(work), "llm": cfg["llm"]["backend"],
                "model": cfg["llm"]["model"], "failures": len(summary["failures"])}
        source = shown_url(shards) if is_url(shards) else str(Path(shards).resolve())
        return store.add_set_from_table(out, table, source=source,
                                        format=f"enrich:{adapter}",
                                        parent=parent, meta=meta,
                                        replace=store.find_set(out) is not None)


def _print_summary(s: dict, info, work: Path) -> None:
    st = s["stats"]
    console.print(f"enriched set '{info.name}': {info.n_captions} captions, {info.n_images} images "
                  f"(shards run {s['shards_run']}, already done {s['shards_skipped']})",
                  markup=False)
    console.print(f"samples {s['samples']} | {s['samples_per_s']:.2f} samples/s | "
                  f"requests {st['requests']} (retries {st['retries']}) | tokens "
                  f"{st['tokens_in']} in / {st['tokens_out']} out | cache hits {st['cache_hits']}"
                  f" | failures {len(s['failures'])}", markup=False, soft_wrap=True)
    if st.get("usage_ignored"):
        console.print(f"warning: the server's token counts of {st['usage_ignored']} replies were "
                      "negative or absurd; counted as 0 (the token totals above are too low)")
    for f in s["failures"][:20]:
        console.print(f"  failed: {f['shard']} {f['key']}: {f['error']}", markup=False)
    if len(s["failures"]) > 20:
        from capaudit.core.storage.urls import join, shown_url

        console.print(f"  ... {len(s['failures']) - 20} more in "
                      f"{shown_url(join(work, 'failures.jsonl'))}", markup=False)


def detect(images: List[Path] = typer.Argument(None, help="image files"),
           shards: Optional[Path] = typer.Option(None, "--shards"),
           detector: str = typer.Option("ssd-mobilenet", "--detector"),
           min_score: float = typer.Option(0.4, "--min-score", min=0.0, max=1.0),
           detector_weights: Optional[str] = typer.Option(None, "--detector-weights"),
           annotations: Optional[str] = typer.Option(None, "--annotations"),
           colors: bool = typer.Option(True, "--colors/--no-colors"),
           jsonl_out: Optional[Path] = typer.Option(None, "--jsonl",
                                                    help="Write the detections as JSONL here"),
           old_json: Optional[Path] = typer.Option(None, "--json", hidden=True,
                                                   help="Deprecated: --jsonl")):
    """Run a detector alone on images or shards: category, score, box (+ colour)."""
    from capaudit.enrich.detect import detect_records

    if bool(images) == bool(shards):
        raise InputError("give either IMAGE files or --shards DIR", fix="not both, not neither")
    json_out = jsonl_out or deprecated_spelling(old_json, "detect --json FILE", "--jsonl FILE")
    opts = {"min_score": min_score} if detector != "annotations" else {}
    if detector_weights:
        opts["weights"] = detector_weights
    if annotations:
        opts["path"] = annotations
    import contextlib

    from capaudit.core.safe_write import atomic_open

    records = []
    with (atomic_open(json_out) if json_out else contextlib.nullcontext()) as fh:
        for rec in detect_records(detector, opts, images=images, shards=shards, colors=colors):
            records.append(rec)
            if fh:
                fh.write(json.dumps(rec, sort_keys=True) + "\n")
            else:
                tags = ", ".join(f"{d['category']} {d['score']:.2f}" for d in rec["detections"])
                console.print(f"{rec['key']}: {tags or '-'}", markup=False)
    if json_out:
        from capaudit.core.config import provenance_beside

        provenance_beside(json_out, {"detector": detector, "options": opts, "colors": colors,
                                     "images": [str(i) for i in images or []],
                                     "shards": str(shards) if shards else None})
        console.print(f"{len(records)} images -> {json_out}")


def register(app: typer.Typer) -> None:
    app.add_typer(shards_app, name="shards")
    app.command("enrich")(enrich)
    app.command("detect")(detect)
