"""``audit run``: resolve targets, audit each, store metrics and per-caption details.

A target is a registered set name or a caption file (format sniffed; it is
read, not registered, and named by its file stem). Results go to DuckDB in
one transaction per command together with the run row (command, resolved
config, seed, versions), so an interrupted audit stores nothing partial.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

from capaudit.errors import InputError

DEFAULTS: dict[str, Any] = {
    "metrics": None,          # None = every default metric
    "mode": "reference",
    "corrected": False,
    "n_boot": 1000,
    "seed": 0,
    "workers": 2,
    "min_images": 10,
    "instances": None,
    "chair_gt": None,
    "demographics": None,
}


@dataclass
class Target:
    name: str
    image_ids: list
    captions: list
    source: str


def load_target(store, target: str) -> Target:
    """A registered set, else a caption file read with the sniffed reader."""
    if store is not None and store.find_set(target) is not None:
        tbl = store.captions(target, "image_id, caption")
        return Target(target, tbl.column("image_id").to_pylist(),
                      tbl.column("caption").to_pylist(), f"set:{target}")
    path = Path(target)
    if not path.exists():
        hint = "register it with capaudit sets add, or give a caption file"
        if store is not None:
            names = [s.name for s in store.list_sets()]
            import difflib
            close = difflib.get_close_matches(target, names, n=1)
            if close:
                hint = f"did you mean the set '{close[0]}'?"
        raise InputError(f"'{target}' is neither a registered set nor a file", fix=hint)
    from capaudit.io.ingest import check_batch
    from capaudit.io.readers import detect_format, get_reader

    reader = get_reader(detect_format(path))
    ids, caps, row = [], [], 0
    for batch in reader.read(path):
        check_batch(batch, path, row)
        row += batch.num_rows
        ids.extend(batch.column("image_id").to_pylist())
        caps.extend(batch.column("caption").to_pylist())
    name = path.name.split(".")[0] if not path.is_dir() else path.name
    return Target(name, ids, caps, str(path))


def audit_target(target: Target, annotations, cfg: dict):
    from capaudit.audit.engine import audit_captions

    metrics = cfg["metrics"]
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    if metrics:
        from capaudit.audit.metrics import METRICS
        for m in metrics:
            METRICS.entry(m)  # did-you-mean on typos
    return audit_captions(target.image_ids, target.captions, annotations, metrics=metrics,
                          mode=cfg["mode"], n_boot=cfg["n_boot"], seed=cfg["seed"],
                          workers=cfg["workers"], min_images=cfg["min_images"],
                          corrected=cfg["corrected"])


def store_results(store, run_id: int, name: str, result) -> None:
    """Write metric rows and per-caption details (caller holds the transaction)."""
    for metric, r in result.results.items():
        extra = dict(r.extra)
        if r.skipped:
            extra["skipped"] = r.skipped
        store.write_metric(run_id, name, metric, r.value, r.n, r.ci_low, r.ci_high, "all", extra)
    d = result.details
    tbl = pa.table({
        "row_idx": d.column("caption_index"), "image_id": d.column("image_id"),
        "n_tokens": d.column("n_tokens"), "n_sentences": d.column("n_sentences"),
        "mentioned": d.column("mentioned"), "hallucinated": d.column("hallucinated"),
        "gender_pred": d.column("gender").cast(pa.string()),
        "chair_s": d.column("chair_s"), "recall": d.column("recall")})
    store.con.register("_details", tbl)
    try:
        store.con.execute(
            "INSERT INTO caption_details SELECT ?, ?, row_idx, image_id, n_tokens, n_sentences, "
            "mentioned, hallucinated, gender_pred, chair_s, recall FROM _details", [run_id, name])
    finally:
        store.con.unregister("_details")


def run_audit(store, targets: Sequence[str], cfg: dict, on_target=None) -> dict[str, Any]:
    """Audit every target; returns {name: AuditResult}; stores all in one transaction."""
    from capaudit.core.config import package_versions
    from capaudit.io.annotation_store import resolve_annotations
    import sys

    annotations = resolve_annotations(store, cfg.get("instances"), cfg.get("chair_gt"),
                                      cfg.get("demographics"))
    loaded = [load_target(store, t) for t in targets]
    names = [t.name for t in loaded]
    if len(set(names)) != len(names):
        raise InputError(f"two targets share the name {names}", fix="register them under "
                         "distinct set names")
    results = {}
    for t in loaded:
        if on_target:
            on_target(t)
        results[t.name] = audit_target(t, annotations, cfg)
    if store is not None:
        with store.transaction():
            run_id = store.start_run(" ".join(["capaudit", *sys.argv[1:]]),
                                     {**cfg, "annotation_sources": annotations.sources},
                                     cfg["seed"], package_versions())
            for name, res in results.items():
                store_results(store, run_id, name, res)
            store.finish_run(run_id, "ok")
        results["_run_id"] = run_id
    results["_annotations"] = annotations
    return results


def results_json(results: dict[str, Any]) -> dict:
    return {"sets": {name: res.to_dict() for name, res in results.items()
                     if not name.startswith("_")}}


def write_json(results: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results_json(results), indent=2))
    tmp.replace(path)
    return path
