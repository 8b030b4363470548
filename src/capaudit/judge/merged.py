"""One summary of a judged run from its tasks' summaries (:class:`.step.JudgeStep`'s merge):
a module of its own so the step keeps to planning, judging and resuming."""

from __future__ import annotations

from dataclasses import fields

from capaudit.judge.config import JudgeConfig, JudgeStats, priced

__all__ = ["merged_summary"]


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


def left_by_other_workers(names: list[str], planned: list[str]) -> list[int]:
    """``[n, m]``: the ``n`` parts in a work folder (its ``names``) this plan (``planned``,
    the parts' names) does not use, an earlier run's with other chunks, and the ``--workers``
    it ran with: 1 (whole sets, ``set-NNNNN``), else at least ``m`` (the last chunk number
    seen, ``set-NNNNN-MMM``, and at least 2: a killed run may have left its first chunks
    only); ``[]``: none. Their chunks differ, so they are judged again, not reused."""
    import re

    planned = set(planned)
    left = [m for m in (re.fullmatch(r"set-\d{5}(?:-(\d{3}))?\.json", n) for n in names)
            if m and m.group(0)[:-5] not in planned]
    chunks = [int(m.group(1)) for m in left if m.group(1)]
    return [len(left), max(2, *chunks) if chunks else 1] if left else []
