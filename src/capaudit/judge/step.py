"""Judged runs as a step of the runner (:mod:`capaudit.runner`): a task per target set.

Why per set: every judged metric is ``compute(judge, sets, evidence, cfg)``, and a set's
numbers (ratios, bootstrap intervals) are its own; what spans the sets (Welch's test of the
first two) is ``compute.across``, run by the merge over all the sets' rows. A metric's own
files (capability's ``--annotations``/``--qa``: ``compute.read_inputs``) are read once by
the driver, through the storage layer (a path or a URL), and handed to every task with their
content (no task reads a path a node of a cluster may not see); their sha256 keys the parts.
So a task judges one set with a judge of its own (:func:`judge_part`: its verdict rows,
values and counts, written whole, then its marker keyed by the judge, the configuration
(``n_boot`` and ``seed`` too: the values are bootstrapped there) and the set's captions and
evidence) on local processes or Ray; a killed run resumes without judging the sets done
again. The merge (:meth:`JudgeStep.merge`) sums the counts, joins the prompts each judge
used into the one identity, and the caller stores everything in one transaction.

A capped run (``max_calls``/``max_cost``) is one task holding every set in order, whatever
the workers: the cap is held by one judge's counts, and the units it reaches are today's.
A dry run writes nothing: its tasks hand their parts back in their summaries.
"""

from __future__ import annotations

import hashlib
import json
import time
from importlib import import_module
from dataclasses import asdict, dataclass, fields

from capaudit.errors import CapauditError
from capaudit.judge.config import JudgeConfig, JudgeStats, priced
from capaudit.judge.stats import Judged
from capaudit.runner.step import Step

__all__ = ["JudgeStep", "JudgeTask", "judge_part", "capped"]

# a judge's settings that change no verdict: left out of the key of its parts
_RUNTIME = ("url", "api_key_env", "concurrency", "timeout_s", "deadline_s", "max_retries",
            "cache", "dry_run")
# what a run spends: a part another run judged (resumed) brings its verdicts, not these
_SPENT = ("calls", "cache_hits", "tokens_in", "tokens_out", "format_retries", "cost", "spent",
          "usage_ignored")


@dataclass(frozen=True)
class JudgeTask:
    name: str            # set-NNNNN: its part and marker
    label: str           # the set (or sets) it judges, named in a failure line
    module: str          # capaudit.judge.NAME, whose compute judges the sets
    sets: tuple          # the sets (their captions) this task judges, in order
    evidence: object     # their images and references only (None: the metric needs none)
    judge: dict          # JudgeConfig as a mapping
    cfg: dict
    folder: str          # where its part and marker go ("": a dry run, nothing written)
    key: str
    input: dict
    inputs: dict | None = None   # the metric's files, read by the driver (compute.read_inputs)


def capped(judge_cfg: JudgeConfig) -> bool:
    """A cap is held by one judge's counts: such a run is one task."""
    return judge_cfg.max_calls is not None or judge_cfg.max_cost is not None


def judge_part(task: JudgeTask) -> dict:
    """Judge the task's sets; a failure (the judge did not answer, a bad annotation) is the
    runner's one line, nothing written."""
    from capaudit.judge.core import Judge

    try:
        judge = Judge(JudgeConfig.from_mapping(task.judge))
        try:
            read = () if task.inputs is None else (task.inputs,)
            out = import_module(task.module).compute(judge, list(task.sets), task.evidence,
                                                     task.cfg, *read)
        finally:
            judge.close()
    except CapauditError as exc:
        return {"shard": task.label, "status": "failed", "fatal": True, "error": str(exc)}
    part = {"items": out.items, "values": out.values, "extra": out.extra,
            "summary": judge.summary()}
    if not task.folder:
        return {"shard": task.label, "status": "done", "part": part}
    from capaudit.core.storage.folder import Folder
    from capaudit.io.markers import marker_name, write_marker

    text = json.dumps(part)
    if not part["summary"]["failed"]:   # units the judge did not answer: judged again by a
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
                 jcfg: JudgeConfig | None = None):
        """``jcfg``: ``cfg["judge"]`` as the caller parsed it (None: parsed here)."""
        self.module, self.sets, self.evidence, self.cfg = module, sets, evidence, cfg
        self.jcfg = jcfg or JudgeConfig.from_mapping(cfg["judge"])
        self.work_dir = "" if self.jcfg.dry_run else str(work_dir)
        self.shared = ((self.work_dir, "work folder", "--work-dir"),) if self.work_dir else ()
        # a metric's files (capability's --annotations, --qa): read here, once, through the
        # storage layer (a path or a URL), and handed to every task (no node reads them)
        read = getattr(import_module(module).compute, "read_inputs", None)
        self.inputs = read(cfg) if read is not None else None
        # n_boot and seed too: a part holds its set's values, bootstrapped in its task
        keep = {k: v for k, v in cfg.items() if k != "judge"}
        keep.update((self.inputs or {}).get("sha256", {}))   # files: their content, not name
        self.key = _key(module, self.jcfg, keep)

    def plan(self, root: str, workers: int) -> list[JudgeTask]:
        """A task per set (one with a cap), those whose part this judge and configuration
        already wrote over the same input left out."""
        from capaudit.core.storage.folder import Folder
        from capaudit.core.storage.urls import join
        from capaudit.io.markers import matches, read_marker

        self.t0 = time.perf_counter()
        groups = [self.sets] if capped(self.jcfg) else [[s] for s in self.sets]
        self.folder = join(root, self.key) if self.work_dir else ""
        self.tasks, todo = [], []
        for i, sets in enumerate(groups):
            evidence = _subset(self.evidence, [x for s in sets for x in s.image_ids])
            task = JudgeTask(f"set-{i:05d}", ", ".join(s.name for s in sets), self.module,
                             tuple(sets), evidence, dict(self.cfg["judge"]), self.cfg,
                             self.folder, self.key, {"sha256": _checksum(sets, evidence)},
                             self.inputs)
            self.tasks.append(task)
            if not (self.folder and matches(read_marker(self.folder, task.name), self.key,
                                            task.input)
                    and Folder(self.folder).exists(task.name + ".json")):
                todo.append(task)
        return todo

    def merge(self, tasks: list, results: list[dict[int, dict]]) -> tuple[Judged, dict]:
        """Every set's rows and values in the sets' order, ``across`` over them, the counts
        summed and the identity of the judges joined."""
        handed = {tasks[i].name: r.get("part") for i, r in results[0].items()}
        parts = [handed.get(t.name) or _read_part(t) for t in self.tasks]
        resumed = [t.name not in handed for t in self.tasks]
        for p, old in zip(parts, resumed):   # its verdicts count, its calls were another run's
            if old:
                p["summary"].update({k: JudgeStats.__dataclass_fields__[k].default
                                     for k in _SPENT})
        out = Judged()
        for p in parts:
            out.items.update(p["items"])
            out.values.update(p["values"])
            out.extra.update(p["extra"])
        across = getattr(import_module(self.module).compute, "across", None)
        if across is not None:
            out.extra.update(across(out))
        summary = merged_summary(self.jcfg, [p["summary"] for p in parts])
        summary["seconds"] = time.perf_counter() - self.t0   # the run's wall time
        if any(resumed):
            summary["resumed_sets"] = sum(len(t.sets) for t, r in zip(self.tasks, resumed) if r)
        return out, summary


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


def merged_summary(jcfg: JudgeConfig, summaries: list[dict]) -> dict:
    """One summary from the tasks' (in task order): counts summed, the cost priced from the
    summed tokens as one judge prices them, the first stop, the prompts of all joined."""
    from capaudit.judge.core import judge_id

    out = {}
    for f in fields(JudgeStats):
        vals = [s[f.name] for s in summaries]
        if f.name in ("cost", "est_cost"):
            tokens = ("tokens_in", "tokens_out") if f.name == "cost" else \
                ("est_tokens_in", "est_tokens_out")
            untouched = all(v == f.default for v in vals)
            out[f.name] = f.default if untouched else priced(
                jcfg.prices.get(jcfg.model), *(sum(s[t] for s in summaries) for t in tokens))
        elif f.name == "stopped":
            out[f.name] = next((v for v in vals if v), None)
        else:
            out[f.name] = sum(vals, f.default)
    ident = {k: v for k, v in summaries[0]["judge"].items() if k != "judge_id"} \
        if summaries else {}
    if ident:
        ident["prompts"] = dict(sorted({k: v for s in summaries
                                        for k, v in s["judge"]["prompts"].items()}.items()))
        ident["judge_id"] = judge_id(ident)
    return {**out, "judge": ident, "dry_run": jcfg.dry_run}


def _subset(evidence, image_ids: list):
    """The evidence of these images alone (what a task carries to its worker)."""
    if evidence is None:
        return None
    from dataclasses import replace

    ids = set(image_ids)
    return replace(evidence, images={k: v for k, v in evidence.images.items() if k in ids},
                   references={k: v for k, v in evidence.references.items() if k in ids})


def _checksum(sets: list, evidence) -> str:
    """The identity of a task's input: its sets' captions, their images and references."""
    h = hashlib.sha256()
    for s in sets:   # Captions, or validate's Labels
        h.update(json.dumps(asdict(s), default=str).encode())
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
    return config_hash({"module": module, "judge": judge, "prompts": prompts, "cfg": cfg})
