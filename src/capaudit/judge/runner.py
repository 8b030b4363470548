"""One path for every judged command: config, captions, evidence, judge, store.

Why one path: the judged metrics differ only in the questions they ask and the
arithmetic after; the rest -- resolving the config (CLI > YAML > defaults),
checking the evidence before any call, the dry run that builds no backend,
the caps, the summary, one transaction for all results, the provenance
beside ``--json`` -- is the same and lives here once. A metric module
provides ``rows`` (the judging of some captions) and ``values`` (a set's arithmetic over its
parts), ``compute(judge, sets, evidence, cfg) -> Judged`` the two over whole sets
(:mod:`.parts`); the judging itself is a step of the runner (:mod:`.step`: a task per set,
or per chunk of a set with several workers, on local workers or Ray, resumed after a kill).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Callable

from capaudit.errors import InputError
from capaudit.judge.core import Judge, JudgeConfig
from capaudit.judge.stats import Judged, label  # re-exported: what a metric module returns

__all__ = ["DEFAULTS", "resolve_config", "Judged", "run_judged", "default_yaml", "label",
           "split_run", "RUN_DEFAULTS"]

# how the judging runs (workers, executor, Ray address, work folder): no part of the results,
# so neither stored with the run's configuration nor written beside --json
RUN_DEFAULTS: dict = {"workers": 1, "executor": "local", "address": None, "work_dir": None}
DEFAULTS: dict = {"judge": asdict(JudgeConfig()), "n_boot": 1000, "seed": 0, "limit": None,
            "assumed_units": 8, **RUN_DEFAULTS}


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
    # the number itself, not its YAML text ('2' compared with 1 was a TypeError)
    cfg["limit"] = check_number("limit", cfg.get("limit"), 1, None, optional=True,
                                flag="--limit")
    cfg["n_boot"] = check_number("n_boot", cfg.get("n_boot"), 0, N_BOOT_MAX, flag="--n-boot")
    cfg["seed"] = check_number("seed", cfg.get("seed"), 0, SEED_MAX, flag="--seed")
    cfg["workers"] = check_number("workers", cfg.get("workers"), 1, 1024, flag="--workers")
    for key in ("executor", "address", "work_dir"):   # a YAML list or bool was a traceback,
        _check_text(key, cfg.get(key))                # or a folder named "True" made
    return cfg


def _check_text(key: str, value) -> None:
    """``executor``, ``address``, ``work_dir``: text (or absent), in one line otherwise."""
    from capaudit.errors import UsageError

    if value is not None and not (isinstance(value, str) and value.strip()):
        flag = "--" + key.replace("_", "-")
        raise UsageError(f"{key} ({flag}) must be non-empty text, not {repr(value)[:80]}",
                         fix=f"give {key} one name, path or URL in the YAML, or pass {flag}")


def split_run(cfg: dict) -> tuple[dict, dict]:
    """(the configuration of the results, how the judging runs: :data:`RUN_DEFAULTS`)."""
    return ({k: v for k, v in cfg.items() if k not in RUN_DEFAULTS},
            {k: cfg.get(k, v) for k, v in RUN_DEFAULTS.items()})


def run_judged(store, command: str, targets: list[str], cfg: dict,
               compute: Callable, *, images=None, shards=None, reference=None,
               run: dict | None = None) -> dict:
    """Run one judged metric on ``targets``; store unless it is a dry run (``run``: how
    the judging runs, :data:`RUN_DEFAULTS`)."""
    from capaudit.judge.evidence import (build_evidence, load_captions, reference_evidence,
                                         refuse_without_ids)

    jcfg = JudgeConfig.from_mapping(cfg["judge"])
    sets = [load_captions(store, t, cfg.get("limit")) for t in targets]
    names = [s.name for s in sets]
    if len(set(names)) != len(names):   # results are keyed by name: one would replace the other
        raise InputError(f"two targets share the name {names}", fix="register them under "
                         "distinct set names")
    read = getattr(compute, "read_inputs", None)   # the metric's own files: read once, here
    inputs = read(cfg) if read is not None else None
    if getattr(compute, "check", None):   # what the metric refuses, before any call
        compute.check(sets, cfg, inputs)
    need = compute.needs_evidence   # "image" (image or references), "reference" or None
    for s in sets if need else ():   # evidence is found by image id: each set's own line
        refuse_without_ids(s.image_ids, s.name)
    ids = [i for s in sets for i in s.image_ids]
    evidence = build_evidence(store, jcfg, ids, images=images, shards=shards,
                              reference=reference) if need == "image" else \
        reference_evidence(store, reference, ids) if need == "reference" else None
    out, summary, done = judged(store, command, compute.__module__, sets, evidence, cfg, run,
                                jcfg, inputs)
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
    done()
    return result


def judged(store, command: str, module: str, sets: list, evidence, cfg: dict,
           run: dict | None, jcfg: JudgeConfig, inputs: dict | None = None
           ) -> tuple[Judged, dict, Callable[[], None]]:
    """The sets judged by the runner (:class:`.step.JudgeStep`; ``jcfg``: ``cfg["judge"]``
    as the caller parsed it; ``inputs``: the metric's own files as read): the merged
    result, the summary, and what removes the work folder once the results are stored."""
    from dataclasses import replace

    from capaudit.core.storage.urls import local_path
    from capaudit.core.storage.work_folder import default_work_dir, remove_work
    from capaudit.executors.base import check_executor
    from capaudit.judge.step import JudgeStep
    from capaudit.runner.run import run_step
    from capaudit.runner.step import RunOptions

    Judge(replace(jcfg, dry_run=True))  # its checks, now
    run = {**RUN_DEFAULTS, **(run or {})}
    check_executor(run["executor"], run["address"])   # one line, a dry run's too
    work = run["work_dir"] or (default_work_dir(getattr(store, "path", ""),
                                                command.replace(" ", "-"), "judge-work"))
    step = JudgeStep(module, sets, evidence, cfg, str(work), jcfg=jcfg, inputs=inputs)
    # a dry run only counts tokens: in this process, no worker or Ray started for it
    opts = RunOptions("local", 1) if jcfg.dry_run else \
        RunOptions(run["executor"], run["workers"], run["address"])
    out, summary = run_step(step, opts)
    up_to = None if run["work_dir"] or local_path(work) is None else local_path(work).parent
    return out, summary, lambda: remove_work(step.folder, up_to=up_to) if step.folder else None


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
                 run: dict | None = None) -> dict:
    """``capaudit judge validate``: judge the labelled sentences, report agreement."""
    from capaudit.core.storage.urls import name_of
    from capaudit.judge.evidence import build_evidence
    from capaudit.judge.validate import Labels, read_labels

    rows, ties = read_labels(labels)
    jcfg = JudgeConfig.from_mapping(cfg["judge"])
    ids = [r["image_id"] for r in rows]
    evidence = build_evidence(store, jcfg, ids, images=images, shards=shards,
                              reference=reference)
    name = Path(name_of(labels)).stem   # a URL's too (its query string left out)
    out, summary, done = judged(store, "judge validate", "capaudit.judge.validate",
                                [Labels(name, ids, rows)], evidence, cfg, run, jcfg)
    items, agr = out.items[name], out.extra["agreement"]
    result = {"command": "judge validate", "judge": summary.pop("judge"), "summary": summary,
              "agreement": agr, "ties": ties, "items": {name: items}}
    if not jcfg.dry_run:
        values = {f"judge.{k}": {"value": agr[k], "n": agr["n"] if k != "spearman" and
                                 k != "kendall" else agr["n_systems"]}
                  for k in ("roc_auc", "macro_f1", "accuracy", "kappa", "spearman", "kendall")}
        result["run_id"] = store_judged(store, "judge validate", cfg, result,
                                        {name: (items, values)})
    done()
    return result
