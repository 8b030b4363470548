"""Report plots (matplotlib, Agg backend, PNG files).

- each bias/hallucination metric against recall across the compared sets,
  with its least-squares line and R² (the GCE paper's trade-off figure);
- the per-category recall difference (man - woman) for the ten categories
  that co-occur most with people.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np



def tradeoff_metrics(metrics) -> list[str]:
    """The bias and hallucination metrics (lower is better, by their spec) to plot against recall."""
    from capaudit.audit.metrics.spec import direction, metric_spec

    return [m for m in metrics if (s := metric_spec(m)) is not None and m == s.name
            and s.criterion in ("bias", "alignment") and direction(m) == -1]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def regression(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Slope, intercept and R² of the least-squares line y ~ x."""
    slope, intercept = np.polyfit(x, y, 1)
    pred = slope * x + intercept
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return float(slope), float(intercept), r2


def tradeoff_plots(cmp, out: Path) -> list[dict]:
    plt = _plt()
    made = []
    for m in tradeoff_metrics(cmp.metrics):
        pts = [(n, cmp.value(n, "recall"), cmp.value(n, m)) for n in cmp.names]
        pts = [p for p in pts if p[1] is not None and p[2] is not None]
        if len(pts) < 2:
            continue
        x = np.array([p[1] for p in pts], float)
        y = np.array([p[2] for p in pts], float)
        fig, ax = plt.subplots(figsize=(4.5, 3.5))
        ax.scatter(x, y)
        for n, xi, yi in pts:
            ax.annotate(n, (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=8)
        info = {"metric": m, "file": f"{m}_vs_recall.png", "n": len(pts)}
        if len(pts) >= 2 and np.ptp(x) > 0:
            slope, icpt, r2 = regression(x, y)
            xs = np.linspace(x.min(), x.max(), 20)
            ax.plot(xs, slope * xs + icpt, "--", color="grey")
            ax.set_title(f"{m} vs recall (R² = {r2:.2f})", fontsize=10)
            info.update(slope=slope, r2=r2)
        ax.set_xlabel("recall")
        ax.set_ylabel(m)
        fig.tight_layout()
        fig.savefig(out / info["file"], dpi=110)
        plt.close(fig)
        made.append(info)
    return made


def people_categories(instances: dict | None, k: int = 10) -> list[str]:
    """The k categories that co-occur most often with 'person' in the images."""
    if not instances:
        return []
    counts: Counter = Counter()
    for cats in instances.values():
        if "person" in cats:
            counts.update(c for c in cats if c != "person")
    return [c for c, _ in counts.most_common(k)]


def disparity_plot(cmp, out: Path) -> dict | None:
    cats = people_categories(getattr(cmp.annotations, "instances", None))
    series = {}
    for n in cmp.names:
        r = cmp.results[n].results.get("recall_disparity")
        if r is None or r.skipped:
            continue
        table = {row["category"]: row["diff_man_minus_woman"]
                 for row in r.extra.get("per_category", [])}
        series[n] = [table.get(c, np.nan) for c in cats]
    if not cats or not series:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / len(series)
    xs = np.arange(len(cats))
    for i, (n, vals) in enumerate(series.items()):
        ax.bar(xs + i * width, vals, width, label=n)
    ax.axhline(0, color="black", linewidth=0.6)
    for i, c in enumerate(cats):  # say why a category has no bar instead of leaving a gap
        if all(np.isnan(v[i]) for v in series.values()):
            ax.text(xs[i] + 0.4 - width / 2, 0, "n/a", ha="center", va="bottom", fontsize=7,
                    color="grey")
    ax.set_xticks(xs + 0.4 - width / 2, cats, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("recall(man) - recall(woman)")
    ax.set_title("Per-category recall difference, top-10 categories co-occurring with people\n"
                 "(n/a: fewer than --min-images images of men or of women)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "recall_diff_by_category.png", dpi=110)
    plt.close(fig)
    return {"file": "recall_diff_by_category.png", "categories": cats, "series": series}
