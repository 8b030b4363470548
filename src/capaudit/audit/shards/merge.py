"""The driver's side of ``audit run --shards``: the done shards' states into one result.

Why apart from :mod:`capaudit.audit.shards.run` (the shard function and the run):
merging is where the driver's memory goes. :func:`merge_shards` takes the
per-shard replicate sums (:mod:`capaudit.audit.shards.sums`) where the Poisson
bootstrap and the shards' image ids allow -- memory independent of the image
count -- and otherwise loads every shard's per-image state (checked against its
marker's sha256, rebuilt without pickles by :mod:`capaudit.audit.shards.state_io`) and
merges them pairwise in shard order (:func:`_merge_tree`), then finalizes and
bootstraps once, exactly as the single-file audit would.
"""

from __future__ import annotations


from capaudit.audit.shards.task import ShardTask, fresh_accumulators, load_task_state

__all__ = ["merge_shards", "load_task_state"]


def merge_shards(ok: list[ShardTask], cfg: dict, annotations, plan: dict | None = None,
                 sums: list[dict] = (), why: str = "per-image states (requested)"):
    """The audit result of the done shards ``ok``: from their replicate sums where
    :func:`~capaudit.audit.shards.sums.sums_plan` gave a ``plan`` (``sums``:
    :func:`~capaudit.audit.shards.sums.shard_sums` of :func:`sums_jobs`, in shard order: the
    runner's second pass), else by merging their per-image states; ``meta["merge"]`` says
    which and why (``why``: the plan's reason when it gave none)."""
    from capaudit.audit.engine import finish_audit

    res = None
    if plan is not None:
        res, why = _by_sums(ok, plan, cfg, sums)
    if res is None:
        level = [load_task_state(t) for t in ok]
        acc, acc2 = _merge_tree(level) if level else fresh_accumulators(cfg, annotations)
        del level
        res = finish_audit(acc, acc2, cfg["n_boot"], cfg["seed"], int(cfg.get("workers") or 1))
    res.meta["merge"] = why
    return res


def sums_jobs(ok: list[ShardTask], plan: dict, cfg: dict) -> list:
    """One replicate-sums job per done shard (:class:`~capaudit.audit.shards.sums.SumsJob`)."""
    from capaudit.audit.shards.sums import SumsJob

    return [SumsJob(t, plan["n_images"], plan["prefix"][i], cfg["n_boot"], cfg["seed"])
            for i, t in enumerate(ok)]


def _by_sums(ok: list[ShardTask], plan: dict, cfg: dict, parts: list[dict]):
    """The result from the shards' replicate sums (:mod:`capaudit.audit.shards.sums`), or
    ``(None, why)`` when a metric's state is not a sum (the caller merges per image)."""
    from capaudit.audit.engine import finish_audit
    from capaudit.audit.shards.sums import finish_sums

    bad = [p["unsupported"] for part in parts for p in (part["acc"], part["acc2"] or {})
           if "unsupported" in p]
    if bad:
        return None, f"per-image states (metric {bad[0]} is not a sum)"
    acc, acc2 = fresh_accumulators(cfg, ok[0].annotations if ok else None)
    res = finish_audit(acc, acc2, 0, cfg["seed"], 1)   # the empty skeleton: details, skips
    res.results = finish_sums([p["acc"] for p in parts], acc, plan, cfg["n_boot"], cfg["seed"])
    if acc2 is not None:
        from capaudit.metrics.spec import CORRECTED_SUFFIX

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
