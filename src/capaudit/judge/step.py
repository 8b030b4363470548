"""Judged runs as a step of the runner (:mod:`capaudit.runner`): a task per target set, or
per chunk of a set with several workers.

Why per set: a set's numbers (ratios, bootstrap intervals) need all its captions, what spans
the sets (Welch's test of the first two) is ``compute.across``, run by the merge over all
the sets' rows. A metric's own files (capability's ``--annotations``/``--qa``:
``compute.read_inputs``) are read once by the driver, through the storage layer (a path or
a URL), and handed to every task with their content (no task reads a path a node of a
cluster may not see); their sha256 keys the parts. A task judges its sets (or chunks) with
a judge of its own (:func:`judge_part`: the metric's ``rows`` of each, :mod:`.parts`, and
its counts, written whole, then its marker keyed by the judge, the configuration and its
captions and evidence) on local processes or Ray; a killed run resumes without judging the
tasks done again. The merge (:meth:`JudgeStep.merge`) computes each set's values from its
parts (the metric's ``values``), sums the counts, joins the prompts each judge used into
the one identity, and the caller stores everything in one transaction.

With several workers a set is cut into as many chunks of whole images (``compute.by_image``
metrics; :func:`task_groups`), so one big set is judged in parallel and resumed by chunk;
one worker keeps a task per set, whose requests are batched as they always were. A capped
run (``max_calls``/``max_cost``) is one task holding every set in order, whatever the
workers: the cap is held by one judge's counts, and the units it reaches are today's.
A dry run writes nothing: its tasks hand their parts back in their summaries.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from importlib import import_module

from capaudit.errors import CapauditError
from capaudit.judge.config import JudgeConfig, JudgeStats, Unanswered
from capaudit.judge.stats import Judged
from capaudit.runner.step import Step

__all__ = ["JudgeStep", "JudgeTask", "judge_part", "capped"]

# a judge's settings that change no verdict: left out of the key of its parts
_RUNTIME = ("url", "api_key_env", "concurrency", "timeout_s", "deadline_s", "max_retries",
            "cache", "dry_run")
# what only a set's values read (the merge, every run): left out of the key of its parts
_VALUES_ONLY = ("n_boot", "seed")
# what a run spends: a part another run judged (resumed) brings its verdicts, not these
_SPENT = ("calls", "cache_hits", "tokens_in", "tokens_out", "format_retries", "cost", "spent",
          "usage_ignored")


@dataclass(frozen=True)
class JudgeTask:
    name: str            # set-NNNNN: its part and marker
    label: str           # the set (or sets) it judges, named in a failure line
    module: str          # capaudit.judge.NAME, whose rows judge the sets (or chunks)
    sets: tuple          # the sets (their captions) this task judges, in order
    evidence: object     # their images and references only (None: the metric needs none)
    judge: dict          # JudgeConfig as a mapping
    cfg: dict
    folder: str          # where its part and marker go ("": a dry run, nothing written)
    key: str
    input: dict
    idx: tuple = ()      # a chunk: (its caption indices in its set,); (): whole sets
    size: int = 0        # its captions: several workers take the largest first
    inputs: dict | None = None   # the metric's files, read by the driver (compute.read_inputs)
    patient: bool = False   # a chunk judged to its end though its judge answered nothing


def capped(judge_cfg: JudgeConfig) -> bool:
    """A cap is held by one judge's counts: such a run is one task."""
    return judge_cfg.max_calls is not None or judge_cfg.max_cost is not None


def judge_part(task: JudgeTask) -> dict:
    """Judge the task's sets; a failure (the judge did not answer, a bad annotation) is the
    runner's one line, nothing written."""
    from capaudit.judge.core import Judge
    from capaudit.judge.parts import part

    try:
        rows = import_module(task.module).rows
        read = () if task.inputs is None else (task.inputs,)
        judge = Judge(JudgeConfig.from_mapping(task.judge))
        judge.patient = task.patient
        try:   # a part per set (or chunk): its rows, its caption indices in the set
            parts = [part(rows, judge, s, idx, task.evidence, task.cfg, *read)
                     for s, idx in zip(task.sets, task.idx or [None] * len(task.sets))]
        finally:
            judge.close()
    except CapauditError as exc:
        if isinstance(exc, Unanswered) and task.idx:   # a chunk: fatal only if its set's
            return {"shard": task.label, "status": "done", "unanswered": str(exc),  # all are
                    "spent": judge.summary()}   # its requests count, whatever comes next
        return {"shard": task.label, "status": "failed", "fatal": True, "error": str(exc)}
    written = {"parts": parts, "summary": judge.summary()}
    if not task.folder:
        return {"shard": task.label, "status": "done", "part": written}
    from capaudit.core.storage.folder import Folder
    from capaudit.io.markers import marker_name, write_marker

    text = json.dumps(written)
    if not written["summary"]["failed"]:   # units the judge did not answer: judged again by a
        folder = Folder(task.folder).make()                                          # rerun
        # an earlier input's marker goes before its part is replaced: a kill in between
        # never leaves it standing over this input's part
        folder.remove(marker_name(task.name))
        folder.write_bytes(task.name + ".json", text.encode())
        write_marker(task.folder, task.name, task.key, {"input": task.input}, stale=False)
    # handed back as written: a worker's memory:// folder is not the driver's
    return {"shard": task.label, "status": "done", "part": json.loads(text)}


class JudgeStep(Step):
    """The sets of one judged command, a task each (one with a cap); see the module."""

    passes = (judge_part,)
    unit = "set"   # a failure line names the set: "set m failed: ..."

    def __init__(self, module: str, sets: list, evidence, cfg: dict, work_dir: str = "", *,
                 jcfg: JudgeConfig | None = None, inputs: dict | None = None):
        """``jcfg``: ``cfg["judge"]`` as the caller parsed it (None: parsed here);
        ``inputs``: the metric's files as the caller read them (``compute.read_inputs``;
        None: read here, once, through the storage layer: no node reads them)."""
        self.module, self.sets, self.evidence, self.cfg = module, sets, evidence, cfg
        self.jcfg = jcfg or JudgeConfig.from_mapping(cfg["judge"])
        self.work_dir = "" if self.jcfg.dry_run else str(work_dir)
        self.shared = ((self.work_dir, "work folder", "--work-dir"),) if self.work_dir else ()
        read = getattr(import_module(module).compute, "read_inputs", None)
        self.inputs = inputs if inputs is not None or read is None else read(cfg)
        # what a metric's rows read (assumed_units, the files' content), not what only its
        # values read: the merge bootstraps every set again, so another --n-boot/--seed
        # resumes the parts and its intervals are a fresh run's
        keep = {k: v for k, v in cfg.items() if k not in ("judge", *_VALUES_ONLY)}
        keep.update((self.inputs or {}).get("sha256", {}))   # files: their content, not name
        self.key = _key(module, self.jcfg, keep)

    def plan(self, root: str, workers: int) -> list[JudgeTask]:
        """A task per set (one with a cap; with several workers, a task per chunk of whole
        images of a set, :func:`task_groups`), those whose part this judge and configuration
        already wrote over the same input left out."""
        from capaudit.core.storage.folder import Folder
        from capaudit.core.storage.urls import join
        from capaudit.io.markers import matches, read_marker

        self.t0 = time.perf_counter()
        self.folder = join(root, self.key) if self.work_dir else ""
        self.tasks, todo = [], []
        for name, label, sets, idx in task_groups(self.module, self.sets, self.jcfg, workers):
            evidence = _subset(self.evidence, [x for s in sets for x in s.image_ids])
            task = JudgeTask(name, label, self.module, tuple(sets), evidence,
                             dict(self.cfg["judge"]), self.cfg, self.folder, self.key,
                             {"sha256": _checksum(sets, evidence, idx)}, idx,
                             sum(len(s.image_ids) for s in sets), self.inputs)
            self.tasks.append(task)
            if not (self.folder and matches(read_marker(self.folder, task.name), self.key,
                                            task.input)
                    and Folder(self.folder).exists(task.name + ".json")):
                todo.append(task)
        from capaudit.judge.merged import left_by_other_workers

        self.unreused = left_by_other_workers(Folder(self.folder).names(), [
            t.name for t in self.tasks]) if self.folder else []
        return todo

    def merge(self, tasks: list, results: list[dict[int, dict]]) -> tuple[Judged, dict]:
        """Every set's values from its parts (the metric's ``values``, :mod:`.parts`) in
        the sets' order, ``across`` over them, the counts summed and the identity of the
        judges joined."""
        from capaudit.judge.merged import merged_summary
        from capaudit.judge.parts import folded

        handed = {tasks[i].name: r.get("part") for i, r in results[0].items()}
        handed.update(answered_again(self.tasks, handed, {
            tasks[i].name: r for i, r in results[0].items() if "unanswered" in r}))
        parts = [handed.get(t.name) or _read_part(t) for t in self.tasks]
        resumed = [t.name not in handed for t in self.tasks]
        by_set: dict = {}
        for t, p, old in zip(self.tasks, parts, resumed):
            if old:   # its verdicts count, its calls were another run's
                p["summary"].update({k: JudgeStats.__dataclass_fields__[k].default
                                     for k in _SPENT})
            for s, rows in zip(t.sets, p["parts"]):
                by_set.setdefault(s.name, []).append(rows)
        metric, out = import_module(self.module), Judged()
        read = () if self.inputs is None else (self.inputs,)
        for s in self.sets:
            folded(out, s.name, metric.values(s, by_set[s.name], self.cfg, self.jcfg.evidence,
                                              *read))
        across = getattr(metric.compute, "across", None)
        if across is not None:
            out.extra.update(across(out))
        summary = merged_summary(self.jcfg, [p["summary"] for p in parts])
        summary["seconds"] = time.perf_counter() - self.t0   # the run's wall time
        for key, chunked in (("resumed_sets", False), ("resumed_parts", True)):
            n = sum(len(t.sets) for t, r in zip(self.tasks, resumed) if r and
                    bool(t.idx) == chunked)
            if n:
                summary[key] = n
        if self.unreused:
            summary["unreused_parts"] = self.unreused
        return out, summary


def answered_again(tasks: list, judged: dict, unanswered: dict) -> dict:
    """The parts of the chunks whose judge answered nothing (``unanswered``: their results),
    as one worker decides: a set none of whose chunks judged by this run (``judged``, not
    resumed) was answered stops the run with that line; another such chunk is judged again
    to its end here, its units failed, what its first pass spent added."""
    from capaudit.runner.run import shard_failed

    out = {}
    for t in (t for t in tasks if t.name in unanswered):
        name = t.sets[0].name
        if all(u.name in unanswered for u in tasks
               if u.idx and u.sets[0].name == name and u.name in judged):
            raise shard_failed({"shard": name, "error": unanswered[t.name]["unanswered"],
                                "fatal": True}, JudgeStep.unit)
        again = judge_part(replace(t, patient=True))
        if again["status"] == "failed":
            raise shard_failed(again, JudgeStep.unit)
        spent, first = again["part"]["summary"], unanswered[t.name]["spent"]
        spent.update({k: spent[k] + first[k] for k in _SPENT
                      if None not in (spent[k], first[k])})   # cost None: no price known
        out[t.name] = again["part"]
    return out


def task_groups(module: str, sets: list, jcfg: JudgeConfig, workers: int) -> list[tuple]:
    """``(name, label, sets, idx)`` of each task: every set in one (a cap), a set each, or
    (several workers, a metric whose chunks of whole images judge as its set:
    ``compute.by_image``) ``workers`` chunks of each set (``idx``: a chunk's caption
    indices in its set). One worker keeps a task per set: a chunk batches the requests
    otherwise, so the calls and cache hits would not be today's."""
    from capaudit.judge.parts import cut, image_chunks

    if capped(jcfg):
        return [("set-00000", ", ".join(s.name for s in sets), sets, ())]
    by_image = workers > 1 and getattr(import_module(module).compute, "by_image", False)
    out = []
    for i, s in enumerate(sets):
        chunks = image_chunks(s.image_ids, workers) if by_image else [None]
        if len(chunks) < 2:
            out.append((f"set-{i:05d}", s.name, [s], ()))
            continue
        out += [(f"set-{i:05d}-{j + 1:03d}", f"{s.name} (part {j + 1} of {len(chunks)})",
                 [cut(s, idx)], (tuple(idx),)) for j, idx in enumerate(chunks)]
    return out


def _read_part(task: JudgeTask) -> dict:
    """A part a run before this one wrote (gone since the plan: one line, the rerun judges
    its set again)."""
    from capaudit.core.storage.folder import Folder
    from capaudit.errors import InputError

    data = Folder(task.folder).read_bytes(task.name + ".json")
    if data is None:
        raise InputError(f"the verdicts of {task.label} left the work folder during the run",
                         path=task.folder, fix="run the command again (that set is judged "
                                               "again); leave the work folder alone meanwhile")
    return json.loads(data)


def _subset(evidence, image_ids: list):
    """The evidence of these images alone (what a task carries to its worker)."""
    if evidence is None:
        return None
    from dataclasses import replace

    ids = set(image_ids)
    return replace(evidence, images={k: v for k, v in evidence.images.items() if k in ids},
                   references={k: v for k, v in evidence.references.items() if k in ids})


def _checksum(sets: list, evidence, idx: tuple = ()) -> str:
    """The identity of a task's input: its sets' captions (a chunk's places in its set
    too), their images and references."""
    h = hashlib.sha256()
    for s in sets:   # Captions, or validate's Labels
        h.update(json.dumps(asdict(s), default=str).encode())
    if idx:
        h.update(json.dumps(idx).encode())
    if evidence is not None:
        h.update(json.dumps(sorted(evidence.references.items(), key=str), default=str).encode())
        for k in sorted(evidence.images, key=str):
            h.update(str(k).encode() + evidence.images[k][0])
    return h.hexdigest()


def _key(module: str, jcfg: JudgeConfig, cfg: dict) -> str:
    """The judge (its settings that change verdicts, every judge prompt's wording) and the
    configuration: what a part's marker must hold for the part to be reused."""
    from capaudit.enrich.adapters.base import PACKAGED_PROMPTS, load_prompt, prompt_hash
    from capaudit.io.markers import config_hash

    names = sorted({p.stem for p in PACKAGED_PROMPTS.glob("judge_*.txt")} | set(jcfg.prompts))
    prompts = {n: prompt_hash(load_prompt(n, jcfg.prompts.get(n))) for n in names}
    judge = {k: v for k, v in asdict(jcfg).items() if k not in _RUNTIME}
    # "part": what a part holds (rows); an older capaudit's parts (values) are not merged
    return config_hash({"module": module, "judge": judge, "prompts": prompts, "cfg": cfg,
                        "part": "rows"})
