"""One path for every judged command: config, captions, evidence, judge, store.

Why one path: the judged metrics differ only in the questions they ask and the
arithmetic after; the rest -- resolving the config (CLI > YAML > defaults),
checking the evidence before any call, the dry run that builds no backend,
the caps, the summary, one transaction for all results, the provenance
beside ``--json`` -- is the same and lives here once. A metric module
provides ``compute(judge, sets, evidence, cfg) -> Judged``.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Callable

from capaudit.judge.core import Judge, JudgeConfig
from capaudit.judge.stats import Judged, label  # re-exported: what a metric module returns

__all__ = ["DEFAULTS", "resolve_config", "Judged", "run_judged", "default_yaml", "label"]

DEFAULTS: dict = {"judge": asdict(JudgeConfig()), "n_boot": 1000, "seed": 0, "limit": None,
            "assumed_units": 8}


def default_yaml() -> Path | None:
    """``./configs/judge.yaml``, else the project's (where the price table lives)."""
    from capaudit.enrich.adapters.base import PACKAGED_PROMPTS

    for p in (Path.cwd() / "configs" / "judge.yaml",
              PACKAGED_PROMPTS.resolve().parent / "judge.yaml"):
        if p.is_file():
            return p
    return None


def resolve_config(config: str | Path | None, judge_cli: dict, **cli) -> dict:
    from capaudit.core.config import resolve
    from capaudit.core.ranges import N_BOOT_MAX, SEED_MAX, check_number

    cfg = resolve(DEFAULTS, config or default_yaml(), {"judge": judge_cli, **cli})
    JudgeConfig.from_mapping(cfg["judge"])  # unknown keys: one line now
    # the YAML's values too (the CLI's are checked as they are parsed): --limit -1 once
    # judged 39 of 40 captions and --limit 0 all 40, paid calls each
    check_number("limit", cfg.get("limit"), 1, None, optional=True, flag="--limit")
    check_number("n_boot", cfg.get("n_boot"), 0, N_BOOT_MAX, flag="--n-boot")
    check_number("seed", cfg.get("seed"), 0, SEED_MAX, flag="--seed")
    return cfg


def run_judged(store, command: str, targets: list[str], cfg: dict,
               compute: Callable, *, images=None, shards=None, reference=None,
               judge: Judge | None = None) -> dict:
    """Run one judged metric on ``targets``; store unless it is a dry run."""
    from capaudit.judge.evidence import build_evidence, load_captions, reference_evidence

    jcfg = JudgeConfig.from_mapping(cfg["judge"])
    sets = [load_captions(store, t, cfg.get("limit")) for t in targets]
    ids = [i for s in sets for i in s.image_ids]
    need = compute.needs_evidence   # "image" (image or references), "reference" or None
    evidence = build_evidence(store, jcfg, ids, images=images, shards=shards,
                              reference=reference) if need == "image" else \
        reference_evidence(store, reference, ids) if need == "reference" else None
    judge = judge or Judge(jcfg)
    try:
        out = compute(judge, sets, evidence, cfg)
    finally:
        judge.close()
    summary = judge.summary()
    if summary["stopped"]:  # every value of a capped run says so, wherever it is shown
        note = f"capped: {summary['not_judged']:,} units not judged ({summary['stopped']})"
        for vals in out.values.values():
            for v in vals.values():
                v["status"], v["note"] = "capped", note
                v.setdefault("extra", {}).update(status="capped", notes=[note])
    result = {"command": command, "judge": summary.pop("judge"), "summary": summary,
              "sets": {s.name: {"source": s.source, "n_captions": len(s.captions)} for s in sets},
              "values": out.values, "extra": out.extra,
              "assumed_units": int(cfg.get("assumed_units", 8))}
    result["items"] = out.items
    if not jcfg.dry_run:
        result["run_id"] = store_judged(store, command, cfg, result, {
            s.name: (out.items.get(s.name, []), out.values.get(s.name, {})) for s in sets})
    return result


def store_judged(store, command: str, cfg: dict, result: dict, per_set: dict) -> int:
    """Run row, judge, verdicts and metric rows in one transaction; returns the run id."""
    from capaudit.core.config import current_command, package_versions
    from capaudit.store.judge import write_judged

    summary = result["summary"]
    stats = {k: summary[k] for k in ("unparsed", "failed", "not_judged", "stopped")}
    with store.transaction():
        run_id = store.start_run(current_command(), {"command": command, **cfg},
                                 cfg.get("seed"), package_versions())
        for name, (items, values) in per_set.items():
            write_judged(store, run_id, command, name, result["judge"], items, values,
                         extra={"stats": stats})
        store.finish_run(run_id, "ok" if not summary["stopped"] else "capped")
    return run_id


def run_validate(store, cfg: dict, labels, *, images=None, shards=None, reference=None,
                 judge: Judge | None = None) -> dict:
    """``capaudit judge validate``: judge the labelled sentences, report agreement."""
    from capaudit.judge.evidence import build_evidence
    from capaudit.judge.validate import compute_validate, read_labels

    rows, ties = read_labels(labels)
    jcfg = JudgeConfig.from_mapping(cfg["judge"])
    evidence = build_evidence(store, jcfg, [r["image_id"] for r in rows], images=images,
                              shards=shards, reference=reference)
    judge = judge or Judge(jcfg)
    try:
        items, agr = compute_validate(judge, rows, evidence)
    finally:
        judge.close()
    summary = judge.summary()
    name = Path(labels).stem
    result = {"command": "judge validate", "judge": summary.pop("judge"), "summary": summary,
              "agreement": agr, "ties": ties, "items": {name: items}}
    if not jcfg.dry_run:
        values = {f"judge.{k}": {"value": agr[k], "n": agr["n"] if k != "spearman" and
                                 k != "kendall" else agr["n_systems"]}
                  for k in ("roc_auc", "macro_f1", "accuracy", "kappa", "spearman", "kendall")}
        result["run_id"] = store_judged(store, "judge validate", cfg, result,
                                        {name: (items, values)})
    return result
