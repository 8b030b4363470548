"""``audit run --shards``: one shard function, local processes or Ray tasks, exact merge.

Why: a pretraining set is 10^7-10^9 captions in hundreds of shards. Each
shard is audited alone (:func:`audit_shard`) into the metrics' *mergeable
state* (:class:`~capaudit.audit.metrics.stream.StreamStats`: per-image sums,
sparse cells, the vocabulary), written under a temporary name, renamed, and
only then marked done with a marker keyed by the audit configuration (one
sub-folder of the work directory per configuration hash) AND the shard's
content hash (:func:`capaudit.io.shards.input_fingerprint`). A
killed audit reruns only the shards without a matching marker.

The driver merges the states in shard order (not completion order) and
finalizes and bootstraps once (:func:`capaudit.audit.engine.finish_audit`),
so the JSON is the same for 1 shard or 7, for 1 local worker, a process
pool or a Ray cluster. Captions without an image id are their own bootstrap
units, numbered ``shard index * 2**40 + row``: the units keep the file order
of the concatenated set, whatever the split.

The state files are never pickles (the work directory is user-controlled):
``.npz`` arrays plus a JSON header (:mod:`capaudit.audit.state_io`), checked
against the sha256 the marker records, and rebuilt only into registered state
types. A metric whose state cannot be saved that way stops the run with one
line; a state file that does not parse names itself and the fix.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from capaudit.errors import InputError

__all__ = ["ShardTask", "audit_shard", "run_sharded", "SHARD_OFFSET"]

SHARD_OFFSET = 1 << 40        # captions per shard stay below this (unit numbering)
STATE_SUFFIX = ".state.npz"
KEY_FIELDS = ("metrics", "mode", "corrected", "min_images")


@dataclass
class ShardTask:
    path: str
    index: int
    work: str
    cfg: dict
    cfg_hash: str
    annotations: Any
    ann_namespaces: dict = field(default_factory=dict)   # {kind: namespace}: the row guard
    details: bool = True                                   # write <shard>.details.parquet


def _state_path(work: Path, shard: str) -> Path:
    return work / (Path(shard).stem + STATE_SUFFIX)


def _parts(acc) -> dict | None:
    if acc is None:
        return None
    return {"states": acc.states, "units": acc.units, "n_captions": acc.n_captions,
            "skipped": acc.skipped}


def _done(task: ShardTask, fp: dict, marker: dict | None) -> bool:
    if not marker or marker.get("config_hash") != task.cfg_hash:
        return False
    if marker.get("index") != task.index or marker.get("input", {}).get("sha256") != fp["sha256"]:
        return False
    from capaudit.audit.shard_outputs import details_ok

    work, name = Path(task.work), Path(task.path).name
    if "coverage" not in marker or task.details and not details_ok(work, name,
                                                                   marker.get("details")):
        return False
    state = _state_path(work, name)
    return state.exists() and _sha256(state.read_bytes()) == marker.get("state_sha256")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def audit_shard(task: ShardTask) -> dict:
    """Audit one shard into its state file (or find it done); a summary, never an exception
    for bad input: ``{"shard", "status": done|resumed|failed, "n_captions", "seconds"}``."""
    from capaudit.audit.engine import accumulate
    from capaudit.audit.runner import metric_names
    from capaudit.audit.shard_outputs import (
        DetailsFile,
        NamespaceGuard,
        details_path,
        shard_coverage,
    )
    from capaudit.audit.state_io import StateError, dumps_state
    from capaudit.io.caption_shards import iter_shard_rows
    from capaudit.io.shards import (
        atomic_write_bytes,
        input_fingerprint,
        read_marker,
        write_marker,
    )

    work, name, t0 = Path(task.work), Path(task.path).name, time.perf_counter()
    marker = read_marker(work, name)
    sink = DetailsFile(details_path(work, name)) if task.details else None
    try:
        fp = input_fingerprint(Path(task.path), (marker or {}).get("input"))
        if _done(task, fp, marker):
            return {"shard": name, "status": "resumed", "n_captions": marker["n_captions"],
                    "seconds": 0.0, "coverage": marker["coverage"],
                    "details": marker.get("details")}
        cfg, guard = task.cfg, NamespaceGuard(task.ann_namespaces)
        acc, acc2 = accumulate(iter_shard_rows(task.path, guard), task.annotations,
                               metric_names(cfg), cfg["mode"], 1, cfg["min_images"],
                               int(cfg.get("chunk_size") or 50_000), sink, cfg["corrected"],
                               None, cfg, offset=task.index * SHARD_OFFSET)
        cov = shard_coverage(acc.units.keys if acc.units is not None else None,
                             task.annotations, task.ann_namespaces, guard)
    except (InputError, OSError) as exc:
        if sink is not None:
            sink.abort()
        return {"shard": name, "status": "failed", "error": " ".join(str(exc).split()),
                "n_captions": 0,
                "seconds": time.perf_counter() - t0}
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
                         "with capaudit.audit.state_io.register_state, or run without --shards)"}
    atomic_write_bytes(_state_path(work, name), data)
    details = sink.commit() if sink is not None else None
    write_marker(work, name, task.cfg_hash, {"index": task.index, "input": fp,
                                             "n_captions": acc.n_captions, "coverage": cov,
                                             "details": details,
                                             "state_sha256": _sha256(data)})
    return {"shard": name, "status": "done", "n_captions": acc.n_captions,
            "seconds": time.perf_counter() - t0, "coverage": cov, "details": details}


def _saveable(state) -> bool:
    from capaudit.audit.state_io import StateError, dumps_state

    try:
        dumps_state(state)
    except StateError:
        return False
    return True


def _load_state(path: Path, data: bytes) -> dict:
    """The shard state in ``path`` (one-line error naming it when it does not parse)."""
    from capaudit.audit.state_io import StateError, loads_state

    try:
        parts = loads_state(data)
        if not isinstance(parts, dict) or not {"acc", "acc2"} <= parts.keys():
            raise StateError("not a shard state")
        return parts
    except StateError as exc:
        raise InputError(f"unreadable shard state ({exc})", path=path,
                         fix=f"delete the work directory {path.parent.parent} and rerun") from None


def _load_into(acc, parts: dict | None) -> None:
    from capaudit.audit.metrics.stream import StreamStats

    if acc is None or parts is None:
        return
    part = StreamStats.__new__(StreamStats)
    part.__dict__.update(acc.__dict__)
    part.states, part.units = parts["states"], parts["units"]
    part.n_captions, part.skipped = parts["n_captions"], parts["skipped"]
    acc.merge(part)


def _fresh(cfg: dict, annotations):
    from capaudit.audit.engine import accumulate
    from capaudit.audit.runner import metric_names

    return accumulate((), annotations, metric_names(cfg), cfg["mode"], 1, cfg["min_images"],
                      corrected=cfg["corrected"], config=cfg)


def load_task_state(task: ShardTask) -> tuple:
    """``(acc, acc2)``: the shard's saved state, checked against its marker's sha256."""
    from capaudit.io.shards import read_marker

    work, shard = Path(task.work), Path(task.path).name
    data = _state_path(work, shard).read_bytes()
    if _sha256(data) != (read_marker(work, shard) or {}).get("state_sha256"):
        raise InputError("a shard state changed under the audit", path=work / shard,
                         fix="rerun (another process wrote this work directory)")
    parts, (a, a2) = _load_state(_state_path(work, shard), data), _fresh(task.cfg,
                                                                          task.annotations)
    _load_into(a, parts["acc"])
    _load_into(a2, parts["acc2"])
    return a, a2


def merge_shards(ok: list[ShardTask], parts: list[dict], cfg: dict, annotations,
                 executor: str = "local", workers: int = 1, address: str | None = None,
                 per_image: bool = False):
    """The audit result of the done shards ``ok`` (``parts``: their coverage counts):
    from per-shard replicate sums where :func:`~capaudit.audit.shard_sums.sums_plan`
    allows, else (or ``per_image``) by merging their per-image states; ``meta["merge"]``
    says which and why."""
    from capaudit.audit.engine import finish_audit
    from capaudit.audit.shard_sums import sums_plan

    plan, why = (None, "per-image merge requested") if per_image else sums_plan(cfg, parts)
    res = None
    if plan is not None:
        res, why = _by_sums(ok, plan, cfg, executor, workers, address)
    if res is None:
        level = [load_task_state(t) for t in ok]
        acc, acc2 = _merge_tree(level) if level else _fresh(cfg, annotations)
        del level
        res = finish_audit(acc, acc2, cfg["n_boot"], cfg["seed"], int(cfg.get("workers") or 1))
    res.meta["merge"] = why
    return res


def _by_sums(ok: list[ShardTask], plan: dict, cfg: dict, executor: str, workers: int,
             address: str | None):
    """The result from per-shard replicate sums (:mod:`capaudit.audit.shard_sums`), or
    ``(None, why)`` when a metric's state is not a sum (the caller merges per image)."""
    from capaudit.audit.engine import finish_audit
    from capaudit.audit.shard_sums import SumsJob, finish_sums, shard_sums
    from capaudit.executors import get_executor

    jobs = [SumsJob(t, plan["n_images"], plan["prefix"][i], cfg["n_boot"], cfg["seed"])
            for i, t in enumerate(ok)]
    got: dict[int, dict] = {}
    ex = get_executor(executor, workers=workers, address=address)
    try:
        for job, part in ex.map_unordered(shard_sums, jobs):
            bad = [p["unsupported"] for p in (part["acc"], part["acc2"] or {}) if "unsupported" in p]
            if bad:
                return None, f"metric {bad[0]} is not a sum: per-image merge"
            got[job.task.index] = part
    finally:
        ex.close()
    acc, acc2 = _fresh(cfg, ok[0].annotations if ok else None)
    res = finish_audit(acc, acc2, 0, cfg["seed"], 1)   # the empty skeleton: details, skips
    parts = [got[t.index] for t in ok]
    res.results = finish_sums([p["acc"] for p in parts], acc, plan, cfg["n_boot"], cfg["seed"])
    if acc2 is not None:
        from capaudit.audit.metrics.spec import CORRECTED_SUFFIX

        res.results.update(finish_sums([p["acc2"] for p in parts], acc2, plan, cfg["n_boot"],
                                       cfg["seed"], CORRECTED_SUFFIX))
    res.meta.update(n_boot=cfg["n_boot"], n_captions=sum(p["acc"]["n_captions"] for p in parts),
                    n_images=plan["n_images"])
    return res, "replicate sums per shard"


def _merge_tree(level: list[tuple]) -> tuple:
    """Merge neighbours pairwise, in shard order, until one is left: each unit is merged
    log2(shards) times instead of once per later shard (a left fold is quadratic)."""
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            (a, a2), (b, b2) = level[i], level[i + 1]
            a.merge(b)
            if a2 is not None:
                a2.merge(b2)
            nxt.append((a, a2))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _key(cfg: dict, annotations) -> dict:
    from capaudit import __version__
    from capaudit.text.objects import LEXICON_PREFIX

    key = {**{k: cfg.get(k) for k in KEY_FIELDS}, "annotations": dict(annotations.sources),
           "capaudit": __version__}
    if str(cfg.get("mode")).startswith(LEXICON_PREFIX):  # a user lexicon: keyed by its content
        key["lexicon_sha256"] = _sha256(Path(cfg["mode"][len(LEXICON_PREFIX):]).read_bytes())
    return key


def run_sharded(spec: str, cfg: dict, annotations, work_dir: str | Path, *,
                executor: str = "local", workers: int = 1, address: str | None = None,
                skip_bad: bool = False, on_start: Callable[[int], Any] | None = None,
                on_shard: Callable[[dict], Any] | None = None, name: str | None = None,
                store=None):
    """Audit every shard of ``spec`` (folder, glob or file) and merge them.

    Returns ``(AuditResult, summaries)``, one summary per shard in shard order.
    A failed shard stops the run with one line (the shards already done keep
    their markers) unless ``skip_bad``: then it is left out and listed. The
    annotation coverage of the shards together is held to the single-file rule
    (``min_coverage``, ``allow_partial``) before the merge; ``res.meta`` then
    holds ``coverage`` and ``details_files`` (``(parquet, shard offset, first
    caption index)`` per shard, for :func:`~capaudit.audit.shard_outputs.attach_details`;
    ``cfg["details"] = False`` writes none). ``store`` resolves stored annotation
    sources' namespaces. ``name`` names the set in the coverage line.
    """
    import dataclasses

    from capaudit.audit import coverage
    from capaudit.audit.runner import metric_names
    from capaudit.audit.shard_outputs import annotation_namespaces, details_path, merged_coverage
    from capaudit.enrich.runner import work_dir_lock
    from capaudit.executors import get_executor
    from capaudit.io.caption_shards import find_shards
    from capaudit.io.shards import clean_tmp, config_hash

    if cfg.get("lic"):
        raise InputError("--lic trains leakage classifiers on the whole set: a model, not a sum "
                         "that shards can merge", fix="drop --lic here and run capaudit audit lic "
                         "on a sample of the set (a caption file of its gender-labelled images)")
    shards = find_shards(spec)
    names = metric_names(cfg)  # typos fail before any work
    ann_ns = annotation_namespaces(store, annotations, names)
    details = bool(cfg.get("details", True))
    key = config_hash(_key(cfg, annotations))
    with work_dir_lock(work_dir) as root:
        work = root / key  # one folder per configuration: configurations do not evict each other
        work.mkdir(exist_ok=True)
        clean_tmp(work)
        tasks = [ShardTask(str(p), i, str(work), cfg, key, annotations, ann_ns, details)
                 for i, p in enumerate(shards)]
        if on_start:
            on_start(len(tasks))
        summaries: dict[int, dict] = {}
        ex = get_executor(executor, workers=workers, address=address)
        try:
            for task, summary in ex.map_unordered(audit_shard, tasks):
                summaries[task.index] = summary
                if on_shard:
                    on_shard(summary)
                if summary["status"] == "failed" and (summary.get("fatal") or not skip_bad):
                    err = summary["error"]
                    raise InputError(f"shard {summary['shard']} failed: {err}", fix=None
                                     if "(fix:" in err else "repair it or pass --skip-bad-shards")
        finally:
            ex.close()
        ok = [t for t in tasks if summaries[t.index]["status"] != "failed"]
        cov = merged_coverage(name or Path(str(spec).split("*")[0]).name or "shards",
                              [summaries[t.index]["coverage"] for t in ok], ann_ns)
        coverage.check(cov, float(cfg.get("min_coverage", 0.5)), bool(cfg.get("allow_partial")))
        files, first = [], 0
        for t in ok:
            n = summaries[t.index]["n_captions"]
            if details and n:
                files.append((details_path(work, Path(t.path).name), t.index * SHARD_OFFSET,
                              first))
            first += n
        res = merge_shards(ok, [summaries[t.index]["coverage"] for t in ok], cfg, annotations,
                           executor, workers, address)
    coverage.mark_skipped(res.results, cov)
    res.meta.update(n_shards=len(tasks), executor=executor, details_files=files,
                    coverage={**dataclasses.asdict(cov), "line": cov.line()})
    return res, [summaries[t.index] for t in tasks]
