"""``capaudit audit run --shards``: the thin CLI over :func:`capaudit.audit.shards.run.run_sharded`.

A progress bar counts shards (captions/s in its label, ETA from the shards
left), then a table of the metrics, a summary of the shards (done, resumed,
failed with their one-line reason), the JSON of today's shape and the
metrics in the store with the run row, and every shard's per-caption details
copied into ``caption_details`` (as the single-file audit stores them).
"""

from __future__ import annotations

import time
from pathlib import Path


from capaudit.audit.config import AuditConfig
from capaudit.cli.common import ShardProgress, console, open_store, print_skipped


def run_shards(shards: str, name: str | None, cfg: AuditConfig | dict, executor: str,
               address: str | None, skip_bad: bool, work_dir: str | None, json_out: str | None,
               db: Path | None, keep_work: bool = False):
    """Audit the shards, store and print the result; the work folder (default
    ``<store>.work/NAME.audit-work``; a URL with ``--work-dir s3://...``) is removed after
    success unless ``keep_work``: a killed run leaves it, and a rerun resumes from it."""
    from capaudit.report.compare import Comparison
    from capaudit.cli.compare_view import print_compare
    from capaudit.audit.runner import results_json, store_metrics
    from capaudit.audit.shards.outputs import attach_details
    from capaudit.audit.shards.run import run_sharded
    from capaudit.core.config import current_command, package_versions, write_json
    from capaudit.io.annotation_store import resolve_annotations
    from capaudit.core.storage.urls import local_path, shown_url
    from capaudit.io.caption_shards import shards_name
    from capaudit.core.storage.work_folder import default_work_dir, remove_work

    cfg = AuditConfig.of(cfg)
    name = name or shards_name(shards)
    store = open_store(db, create=True)
    annotations = resolve_annotations(store, cfg.get("instances"), cfg.get("chair_gt"),
                                      cfg.get("demographics"))
    work = work_dir or default_work_dir(store.path, name, "audit-work")
    # what removal may take after success: the default folder and <store>.work if empty;
    # a --work-dir folder only if this run made it (a URL: only this configuration's objects)
    local = local_path(work)
    up_to = None if local is None else local.parent if work_dir is None else None \
        if local.exists() else local
    stored = {**cfg, "shards": shards, "executor": executor}  # the run row's config
    t0 = time.perf_counter()
    with ShardProgress("auditing shards", "n_captions") as bar:
        res, summaries = run_sharded(shards, cfg, annotations, work, executor=executor,
                                     workers=int(cfg.workers or 1), address=address,
                                     skip_bad=skip_bad, on_start=bar.start, on_shard=bar.shard,
                                     name=name, store=store)
    wall = time.perf_counter() - t0
    res.meta["wall_s"] = round(wall, 3)
    with store.bulk_transaction():   # details by the million
        run_id = store.start_run(current_command(), {**stored, "annotation_sources":
                                                     annotations.sources},
                                 cfg.seed, package_versions())
        store_metrics(store, run_id, name, res)
        n_details = attach_details(store, run_id, name, res.meta.pop("details_files"))
        store.finish_run(run_id, "ok")
    made = res.meta.pop("work_folder")
    if not keep_work:
        remove_work(made, up_to=up_to)
    if json_out:
        write_json(json_out, results_json({name: res}), {**stored, "run_id": run_id}, cfg.seed)
        json_out = shown_url(json_out)
    console.print(res.meta["coverage"]["line"], markup=False)
    print_compare(Comparison([name], list(res.results), {name: res}))
    by = {s: [x for x in summaries if x["status"] == s] for s in ("done", "resumed", "failed")}
    n = res.meta["n_captions"]
    console.print(f"{len(summaries)} shards: {len(by['done'])} audited, {len(by['resumed'])} "
                  f"resumed, {len(by['failed'])} failed; {n:,} captions in {wall:.1f} s "
                  f"({n / max(wall, 1e-9):,.0f} captions/s, {res.meta['workers']} of "
                  f"{cfg.workers or 1} workers: idle cores and input size); driver merge: "
                  f"{res.meta['merge']}")
    print_skipped(by["failed"])
    console.print(f"stored as run {run_id} in {store.path} ({n_details:,} caption "
                  f"details)" + (f"; JSON: {json_out}" if json_out else "")
                  + (f"; work folder kept: {shown_url(made)}" if keep_work else ""))
