"""LIC as audit metrics: ``lic_m`` / ``lic_d`` / ``lic`` results for ``audit run --lic``.

Why apart from :mod:`capaudit.audit.lic.runner`: that module trains and scores
classifiers on plain dicts; this one adapts a caption target and the stored
annotations to it, caches each seed's result in the store (a rerun trains
nothing) and turns the per-seed values into :class:`MetricResult` rows whose
interval is a t-interval over seeds (the spread is training randomness, not
an image bootstrap, and says so in ``extra["interval"]``).
"""

from __future__ import annotations

from capaudit.io.targets import Target, load_target


class StoreCache:
    """LIC results cached in the store, keyed by (fingerprint, config, seed)."""

    def __init__(self, store):
        self.store = store

    def get(self, key: str):
        return self.store.cache_get(key)

    def put(self, key: str, value: dict) -> None:
        with self.store.transaction():
            self.store.cache_put(key, value)


def _seed_interval(values: list[float]) -> tuple[float | None, float | None]:
    """95% t-interval of the mean over classifier seeds (training randomness, not images)."""
    import math

    import numpy as np
    from scipy import stats

    if len(values) < 2:
        return None, None
    v = np.asarray(values, float)
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean() - half), float(v.mean() + half)


def lic_results(store, target: Target, annotations, cfg: dict) -> dict:
    """LIC_M (and LIC_D, LIC with a human reference set) as metric results."""
    from capaudit.audit.lic import run_lic
    from capaudit.audit.lic.runner import DEFAULT_SEEDS
    from capaudit.metrics.estimate import MetricResult

    if not annotations.gender:
        return {"lic_m": MetricResult(None, 0, skipped="LIC needs image gender labels "
                                      "(--demographics or stored demographics)")}
    model: dict[int, str] = {}
    for iid, cap in zip(target.image_ids, target.captions):
        if iid is not None and iid not in model:  # first caption per image, as the reference
            model[iid] = cap
    human = None
    if cfg.get("lic_reference"):
        ref = load_target(store, cfg["lic_reference"])
        human = {}
        for iid, cap in zip(ref.image_ids, ref.captions):
            if iid is not None:
                human.setdefault(iid, []).append(cap)
    out = run_lic(model, annotations.gender, human, classifier=cfg["lic_classifier"],
                  seeds=DEFAULT_SEEDS[:int(cfg["lic_seeds"])], epochs=cfg["lic_epochs"],
                  cache=StoreCache(store) if store is not None else None)
    results = {}
    for key in ("lic_m", "lic_d", "lic"):
        part = out.get(key)
        if not part:
            continue
        seeds = [float(v) for v in part["seeds"].values()]
        lo, hi = _seed_interval(seeds)
        results[key] = MetricResult(part["value"], out.get("n_images", len(model)), lo, hi,
                                    extra={"std": part["std"], "seeds": part["seeds"],
                                           "classifier": cfg["lic_classifier"],
                                           "interval": "t over seeds"})
    return results
