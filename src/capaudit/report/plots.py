"""Report plots (matplotlib, Agg backend, PNG files).

- each bias/hallucination metric against recall across the compared sets,
  95% intervals as error bars, with its least-squares line and R² only from
  ``MIN_FIT`` sets *and* ``MIN_FIT_IMAGES`` images all of them share on (the GCE
  paper's trade-off figure; sets that share 2 images differ in their images as much
  as in their captions, and a line through them says nothing); values flagged "by
  construction" are drawn hollow and left out of the fit;
- the per-category recall difference (man - woman) for the ten categories
  that co-occur most with people.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np


def tradeoff_metrics(metrics) -> list[str]:
    """The bias and hallucination metrics (lower is better, by their spec) to plot against recall."""
    from capaudit.metrics.spec import direction, metric_spec

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


MIN_FIT = 4   # a line through 2 or 3 points says nothing (R² of 2 points is always 1)
MIN_FIT_IMAGES = 30   # images the fitted sets must share


def shared_images(cmp) -> int | None:
    """Images every compared set has (``None``: not known)."""
    basis = getattr(cmp, "basis", None)
    return None if basis is None else basis.shared_images


def fit_caption(info: dict) -> str:
    """What a trade-off line rests on, or why there is none: sets and shared images."""
    shared = info.get("shared_images")
    imgs = "" if shared is None else f", {shared:,} shared images"
    if "r2" in info:
        return f"slope {info['slope']:.3f}, R² = {info['r2']:.2f}, {info['fit_n']} sets{imgs}"
    return (f"no fitted line: {info['fit_n']} sets{imgs}; a line needs {MIN_FIT} sets and "
            f"{MIN_FIT_IMAGES} shared images")


def colours(names) -> dict[str, str]:
    """One colour per set, the same in every plot (compare order)."""
    cycle = [f"C{i % 10}" for i in range(len(names))]
    return dict(zip(names, cycle))


def _err(r) -> list[list[float]]:
    """Asymmetric error bar [[below], [above]] from a result's 95% interval (0 without one)."""
    if r is None or r.ci_low is None or r.ci_high is None:
        return [[0.0], [0.0]]
    return [[max(0.0, r.value - r.ci_low)], [max(0.0, r.ci_high - r.value)]]


def _legend(ax) -> None:
    """Set names in a legend outside the axes: long names never run off the plot."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
              frameon=False)


def _save(fig, path: Path) -> None:
    """A PNG through the one writer (temporary file, renamed; never through a link)."""
    from capaudit.core.safe_write import atomic_open

    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110, bbox_inches="tight")


def text_label(text: str) -> str:
    """A set name as plain text in a plot: ``$`` escaped, so matplotlib never reads a name
    like ``$x^$`` as mathtext (which fails while the figure is drawn)."""
    return str(text).replace("$", r"\$")


def tradeoff_plots(cmp, out: Path) -> list[dict]:
    """Each metric against recall, 95% intervals as error bars; a fitted line from 4 sets."""
    from capaudit.metrics.spec import label

    plt = _plt()
    made = []
    col = colours(cmp.names)
    flags = getattr(cmp, "flags", {})
    for m in tradeoff_metrics(cmp.metrics):
        pts = [(n, cmp.result(n, "recall"), cmp.result(n, m)) for n in cmp.names]
        pts = [p for p in pts if cmp.value(p[0], "recall") is not None
               and cmp.value(p[0], m) is not None]
        if len(pts) < 2:
            continue
        fig, ax = plt.subplots(figsize=(6.0, 3.6))
        for n, rx, ry in pts:
            flagged = (n, m) in flags
            ax.errorbar(rx.value, ry.value, xerr=_err(rx), yerr=_err(ry), fmt="o", capsize=3,
                        color=col[n], mfc="white" if flagged else col[n],
                        label=text_label(n) + (f" ({ry.status.replace('-', ' ')})" if flagged
                                               else ""))
        fit = [(rx.value, ry.value) for n, rx, ry in pts if (n, m) not in flags]
        info = {"metric": m, "file": f"{m}_vs_recall.png", "n": len(pts), "fit_n": len(fit),
                "shared_images": shared_images(cmp)}
        x = np.array([p[0] for p in fit], float)
        y = np.array([p[1] for p in fit], float)
        title = f"{label(m)} vs Recall"
        enough = info["shared_images"] is None or info["shared_images"] >= MIN_FIT_IMAGES
        if len(fit) >= MIN_FIT and enough and np.ptp(x) > 0:
            slope, icpt, r2 = regression(x, y)
            xs = np.linspace(x.min(), x.max(), 20)
            ax.plot(xs, slope * xs + icpt, "--", color="grey", linewidth=1)
            info.update(slope=slope, r2=r2)
        title += f"\n({fit_caption(info)})"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(f"{label('recall')} (95% interval)", fontsize=8)
        ax.set_ylabel(f"{label(m)} (95% interval)", fontsize=8)
        ax.tick_params(labelsize=7)
        _legend(ax)
        fig.tight_layout()
        _save(fig, out / info["file"])
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
    col = colours(cmp.names)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / len(series)
    xs = np.arange(len(cats))
    for i, (n, vals) in enumerate(series.items()):
        ax.bar(xs + i * width, vals, width, label=text_label(n), color=col[n])
    ax.axhline(0, color="black", linewidth=0.6)
    for i, c in enumerate(cats):  # say why a category has no bar instead of leaving a gap
        if all(np.isnan(v[i]) for v in series.values()):
            ax.text(xs[i] + 0.4 - width / 2, 0, "n/a", ha="center", va="bottom", fontsize=7,
                    color="grey")
    ax.set_xticks(xs + 0.4 - width / 2, [text_label(c) for c in cats], rotation=35, ha="right",
                  fontsize=8)
    ax.set_ylabel("recall(man) - recall(woman)")
    ax.set_title("Per-category recall difference, top-10 categories co-occurring with people\n"
                 "(n/a: fewer than --min-images images of men or of women)", fontsize=9)
    _legend(ax)
    fig.tight_layout()
    _save(fig, out / "recall_diff_by_category.png")
    plt.close(fig)
    return {"file": "recall_diff_by_category.png", "categories": cats, "series": series}
