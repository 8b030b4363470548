"""``audit run --shards``: one shard function, local processes or Ray tasks, exact merge.

Why: a pretraining set is 10^7-10^9 captions in hundreds of shards. Each
shard is audited alone (:func:`audit_shard`) into the metrics' *mergeable
state* (:class:`~capaudit.metrics.stream.StreamStats`: per-image sums,
sparse cells, the vocabulary), written under a temporary name, renamed, and
only then marked done with a marker keyed by the audit configuration (one
sub-folder of the work directory per configuration hash) AND the shard's
content hash (:func:`capaudit.io.markers.input_fingerprint`). A
killed audit reruns only the shards without a matching marker.

The driver merges the states in shard order (not completion order) and
finalizes and bootstraps once (:func:`capaudit.audit.engine.finish_audit`),
so the JSON is the same for 1 shard or 7, for 1 local worker, a process
pool or a Ray cluster. Captions without an image id are their own bootstrap
units, numbered ``shard index * 2**40 + row``: the units keep the file order
of the concatenated set, whatever the split.

The state files are never pickles (the work directory is user-controlled):
``.npz`` arrays plus a JSON header (:mod:`capaudit.audit.shards.state_io`), checked
against the sha256 the marker records, and rebuilt only into registered state
types. A metric whose state cannot be saved that way stops the run with one
line; a state file that does not parse names itself and the fix.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from capaudit.audit.shards.sums import shard_sums
from capaudit.audit.shards.task import ShardTask, sha256_hex, state_name
from capaudit.errors import InputError
from capaudit.audit.config import AuditConfig
from capaudit.io.markers import config_hash
from capaudit.runner.step import Step, shard_bytes

__all__ = ["ShardTask", "audit_shard", "run_sharded", "SHARD_OFFSET"]

SHARD_OFFSET = 1 << 40        # captions per shard stay below this (unit numbering)
KEY_FIELDS = ("metrics", "mode", "corrected", "min_images")


def _parts(acc) -> dict | None:
    if acc is None:
        return None
    return {"states": acc.states, "units": acc.units, "n_captions": acc.n_captions,
            "skipped": acc.skipped}


def _done(task: ShardTask, fp: dict, marker: dict | None, folder) -> bool:
    from capaudit.io.markers import matches

    if not matches(marker, task.cfg_hash, fp) or marker.get("index") != task.index:
        return False
    from capaudit.audit.shards.outputs import details_ok

    if "coverage" not in marker or task.details and not details_ok(folder, task.name,
                                                                   marker.get("details")):
        return False
    state = folder.read_bytes(state_name(task.name))
    return state is not None and sha256_hex(state) == marker.get("state_sha256")


def audit_shard(task: ShardTask) -> dict:
    """Audit one shard into its state file (or find it done); a summary, never an exception
    for bad input: ``{"shard", "status": done|resumed|failed, "n_captions", "seconds"}``."""
    from capaudit.audit.engine import accumulate
    from capaudit.audit.runner import metric_names
    from capaudit.audit.shards.outputs import DetailsFile, JoinGuard, shard_coverage
    from capaudit.audit.shards.state_io import StateError, dumps_state
    from capaudit.io.caption_shards import iter_shard_rows
    from capaudit.io.markers import input_fingerprint, read_marker, write_marker

    folder, name, t0 = task.folder(), task.name, time.perf_counter()
    marker = read_marker(folder, name)
    sink = DetailsFile(folder, name) if task.details else None
    try:
        fp = input_fingerprint(task.path, (marker or {}).get("input"), known=task.identity,
                               storage_options=task.storage_options)
        if _done(task, fp, marker, folder):
            return {"shard": name, "status": "resumed", "n_captions": marker["n_captions"],
                    "seconds": 0.0, "coverage": marker["coverage"],
                    "details": marker.get("details")}
        cfg, guard = task.cfg, JoinGuard(task.annotations, task.ann_namespaces)
        rows = iter_shard_rows(task.path, guard, task.storage_options)
        acc, acc2 = accumulate(rows, task.annotations,
                               metric_names(cfg), cfg["mode"], 1, cfg["min_images"],
                               int(cfg.get("chunk_size") or 50_000), sink, cfg["corrected"],
                               None, cfg, offset=task.index * SHARD_OFFSET)
        cov = shard_coverage(guard, acc.units.keys if acc.units is not None else None)
    except (InputError, OSError) as exc:
        if sink is not None:
            sink.abort()
        return {"shard": name, "status": "failed", "error": " ".join(str(exc).split()),
                "n_captions": 0,
                "seconds": time.perf_counter() - t0}
    except BaseException:   # Ctrl-C, a lost worker: no half details file, no open upload
        if sink is not None:
            sink.abort()
        raise
    try:
        data = dumps_state({"acc": _parts(acc), "acc2": _parts(acc2)})
    except StateError as exc:
        if sink is not None:
            sink.abort()
        names = [n for a in (acc, acc2) if a is not None for n, st in a.states.items()
                 if not _saveable(st)]
        return {"shard": name, "status": "failed", "fatal": True, "n_captions": 0,
                "seconds": time.perf_counter() - t0,
                "error": f"the state of metric {', '.join(names) or '?'} cannot be saved "
                         f"safely for --shards ({exc}) (fix: register its state dataclass "
                         "with capaudit.audit.shards.state_io.register_state, or run without --shards)"}
    folder.write_bytes(state_name(name), data)
    details = sink.commit() if sink is not None else None
    write_marker(folder, name, task.cfg_hash, {"index": task.index, "input": fp,
                                             "n_captions": acc.n_captions, "coverage": cov,
                                             "details": details,
                                             "state_sha256": sha256_hex(data)},
                 stale=marker is not None)
    return {"shard": name, "status": "done", "n_captions": acc.n_captions,
            "seconds": time.perf_counter() - t0, "coverage": cov, "details": details}


def _saveable(state) -> bool:
    from capaudit.audit.shards.state_io import StateError, dumps_state

    try:
        dumps_state(state)
    except StateError:
        return False
    return True


def _key(cfg: dict, annotations) -> dict:
    from capaudit import __version__
    from capaudit.text.objects import LEXICON_PREFIX

    key = {**{k: cfg.get(k) for k in KEY_FIELDS}, "annotations": dict(annotations.sources),
           "capaudit": __version__}
    if str(cfg.get("mode")).startswith(LEXICON_PREFIX):  # a user lexicon: keyed by its content
        key["lexicon_sha256"] = sha256_hex(Path(cfg["mode"][len(LEXICON_PREFIX):]).read_bytes())
    return key


class AuditStep(Step):
    """``audit run --shards`` as a step of the runner: a task per shard (:func:`audit_shard`),
    the states merged in shard order once the shards' coverage is held to the set's rule."""

    worker_mb = 64.0        # an audit's accumulators are heavy: 64 MB of shards per worker
    passes = (audit_shard, shard_sums)

    def __init__(self, spec: str, cfg: AuditConfig, annotations, work_dir, shards: list,
                 opts: dict, ann_ns, name: str | None):
        self.spec, self.cfg, self.annotations, self.work_dir = spec, cfg, annotations, work_dir
        self.shards, self.opts, self.ann_ns, self.name = shards, opts, ann_ns, name
        self.sizes, self.shared = shard_bytes(shards), ((str(work_dir), "work folder",
                                                         "--work-dir"),)
        self.details = bool(cfg.get("details", True))
        self.key = config_hash(_key(cfg, annotations))

    def plan(self, root: str, workers: int) -> list[ShardTask]:
        from capaudit.core.storage.folder import Folder
        from capaudit.io.markers import clean_tmp

        self.workers = workers
        self.work = Folder(root, self.opts).sub(self.key).make()  # one folder per configuration
        clean_tmp(self.work)
        return [ShardTask(e.location, i, self.work.location, self.cfg, self.key,
                          self.annotations, self.ann_ns, self.details, dict(e.identity),
                          self.opts) for i, e in enumerate(self.shards)]

    def between(self, tasks: list[ShardTask], results: list[dict[int, dict]]) -> list:
        """The shards' coverage held to the single-file rule; then, where
        :func:`~capaudit.audit.shards.sums.sums_plan` allows, each done shard's replicate sums
        (the second pass, on the same workers)."""
        from capaudit.audit import annotation_coverage as coverage
        from capaudit.audit.shards.merge import sums_jobs
        from capaudit.audit.shards.outputs import merged_coverage
        from capaudit.audit.shards.sums import sums_plan
        from capaudit.io.caption_shards import shards_name

        self.ok = super().between(tasks, results)      # the shards the first pass did not fail
        covs = [results[0][t.index]["coverage"] for t in self.ok]
        self.cov = merged_coverage(self.name or shards_name(self.spec), covs, self.ann_ns)
        coverage.check(self.cov, float(self.cfg.get("min_coverage", 0.5)),
                       bool(self.cfg.get("allow_partial")))
        self.planned = sums_plan(self.cfg, covs)      # (the plan or None, why)
        plan = self.planned[0]
        return [] if plan is None else sums_jobs(self.ok, plan, self.cfg)

    def merge(self, tasks: list[ShardTask], results: list[dict[int, dict]]):
        """The done shards' replicate sums added, or their states merged."""
        from capaudit.audit.shards.merge import merge_shards

        summaries, sums = results
        files = _details_files(self.ok, summaries, self.details)
        plan, why = self.planned
        res = merge_shards(self.ok, self.cfg, self.annotations, plan,
                           [sums[i] for i in sorted(sums)], why)
        return res, self.cov, files, [summaries[t.index] for t in tasks]


def run_sharded(spec: str, cfg: AuditConfig | dict, annotations, work_dir: str | Path, *,
                executor: str = "local", workers: int = 1, address: str | None = None,
                skip_bad: bool = False, on_start: Callable[[int, int], Any] | None = None,
                on_shard: Callable[[dict], Any] | None = None, name: str | None = None,
                store=None, storage_options: dict | None = None):
    """Audit every shard of ``spec`` (folder, glob, brace list, manifest or file; paths or
    URLs) and merge them.

    Returns ``(AuditResult, summaries)``, one summary per shard in shard order.
    A failed shard stops the run with one line (the shards already done keep
    their markers) unless ``skip_bad``: then it is left out and listed. The
    annotation coverage of the shards together is held to the single-file rule
    (``min_coverage``, ``allow_partial``) before the merge; ``res.meta`` then
    holds ``coverage`` and ``details_files`` (``(parquet, shard offset, first
    caption index)`` per shard, for :func:`~capaudit.audit.shards.outputs.attach_details`;
    ``cfg["details"] = False`` writes none). ``store`` resolves stored annotation
    sources' namespaces. ``name`` names the set in the coverage line. ``work_dir`` may be a
    URL (a Ray cluster without a shared disk needs one: a local path is refused there);
    ``storage_options`` (no credentials: every node uses its own) reach every task.
    """
    import dataclasses

    from capaudit.audit import annotation_coverage as coverage
    from capaudit.audit.result_status import assign_status
    from capaudit.audit.runner import metric_names
    from capaudit.audit.shards.outputs import annotation_namespaces
    from capaudit.io.caption_shards import find_shard_entries
    from capaudit.runner.run import run_step
    from capaudit.runner.step import RunOptions

    cfg = AuditConfig.of(cfg)
    if cfg.get("lic"):
        raise InputError("--lic trains leakage classifiers on the whole set: a model, not a sum "
                         "that shards can merge", fix="drop --lic here and run capaudit audit lic "
                         "on a sample of the set (a caption file of its gender-labelled images)")
    opts = _task_options(storage_options)
    shards = find_shard_entries(spec, opts)
    ann_ns = annotation_namespaces(store, annotations, metric_names(cfg))  # typos fail first
    step = AuditStep(spec, cfg, annotations, work_dir, shards, opts, ann_ns, name)
    res, cov, files, summaries = run_step(step, RunOptions(executor, workers, address, skip_bad,
                                                           on_shard, on_start))
    coverage.mark_skipped(res.results, cov)
    assign_status(res.results, cov, cfg)
    res.meta.update(n_shards=len(shards), executor=executor, workers=step.workers,
                    details_files=files,
                    work_folder=step.work.location,   # this configuration's: the CLI removes it
                    coverage={**dataclasses.asdict(cov), "line": cov.line()})
    return res, summaries


def _details_files(ok: list[ShardTask], summaries: dict, details: bool) -> list[tuple]:
    """``(details file, shard offset, first caption index)`` of each done shard with rows."""
    from capaudit.audit.shards.outputs import details_path

    files, first = [], 0
    for t in ok:
        n = summaries[t.index]["n_captions"]
        if details and n:
            files.append((details_path(t.work, t.name), t.index * SHARD_OFFSET, first))
        first += n
    return files


def _task_options(storage_options: dict | None) -> dict:
    """Storage options for the tasks: plain settings (endpoint, region, anonymous access);
    a credential is refused, since a task's arguments are pickled and shipped to other
    machines (each node uses its own credentials: environment, profile, instance role)."""
    from capaudit.core.redact import is_secret_name

    opts = dict(storage_options or {})
    secret = [k for k in opts if is_secret_name(k, opts) or k == "key"]
    if secret:
        raise InputError(f"storage options {', '.join(map(repr, secret))} hold credentials; "
                         "they would be shipped to every worker",
                         fix="give credentials through each machine's own sources "
                             "(AWS_PROFILE, AWS_ACCESS_KEY_ID, HF_TOKEN, an instance role)")
    return opts
