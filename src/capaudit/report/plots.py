"""Report plots (matplotlib, Agg backend, PNG files).

- each bias/hallucination metric against recall across the compared sets,
  95% intervals as error bars (the GCE paper's trade-off figure). A least-squares line
  is drawn only where it means something: through ``MIN_FIT`` captioning models or more
  (human caption sets are drawn as stars and never fitted: they are the reference the
  models are read against, not one of them), on ``MIN_FIT_IMAGES`` images all of them
  share, with a slope distinguishable from 0 (p < ``MAX_P``, the t-test of the slope).
  R², p and n stand beside every plot, line or not; values flagged "by construction"
  are drawn hollow and left out of the fit;
- the per-category recall difference (man - woman) for the ten categories
  that co-occur most with people, each bar with its 95% interval (from the audit's
  resamples); a category left out of recall disparity says why ("n/a: 4 images of
  women, under --min-images 10").
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from capaudit.metrics.spec import direction, label, metric_spec


def tradeoff_metrics(metrics) -> list[str]:
    """The bias and hallucination metrics (lower is better, by their spec) to plot against recall."""
    return [m for m in metrics if (s := metric_spec(m)) is not None and m == s.name
            and s.criterion in ("bias", "alignment") and direction(m) == -1]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def regression(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """Slope, intercept, R² and the two-sided p-value of the slope (t-test, n - 2 degrees of
    freedom) of the least-squares line y ~ x."""
    from scipy import stats

    slope, intercept = np.polyfit(x, y, 1)
    pred = slope * x + intercept
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    dof = len(x) - 2
    if ss_res == 0 or dof <= 0:
        p = 0.0 if ss_res == 0 and dof > 0 else 1.0
    else:
        se = np.sqrt(ss_res / dof / float(((x - x.mean()) ** 2).sum()))
        p = float(2 * stats.t.sf(abs(slope) / se, dof))
    return float(slope), float(intercept), r2, p


MIN_FIT = 4   # a line through 2 or 3 points says nothing (R² of 2 points is always 1)
MIN_FIT_IMAGES = 30   # images the fitted sets must share
MAX_P = 0.05  # the slope's p-value under which a line is drawn


def shared_images(cmp) -> int | None:
    """Images every compared set has (``None``: not known)."""
    basis = getattr(cmp, "basis", None)
    return None if basis is None else basis.shared_images


def fit_caption(info: dict) -> str:
    """What a trade-off line rests on (slope, R², p, sets, shared images), or why there is
    none; the human sets left out of the fit are named."""
    shared = info.get("shared_images")
    imgs = "" if shared is None else f", {shared:,} shared images"
    human = (f"; not fitted: {', '.join(info['human'])} (human captions)"
             if info.get("human") else "")
    n = f"{info['fit_n']} sets{imgs}"
    if info.get("drawn"):
        return (f"slope {info['slope']:.3f}, R² = {info['r2']:.2f}, p = {info['p']:.3f}, "
                f"{n}{human}")
    if "r2" in info:
        return (f"no fitted line: R² = {info['r2']:.2f}, p = {info['p']:.2f}, {n}; the slope is "
                f"not distinguishable from 0 (a line needs p under {MAX_P}){human}")
    return (f"no fitted line: {n}; a line needs {MIN_FIT} sets and {MIN_FIT_IMAGES} "
            f"shared images{human}")


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
    plt = _plt()
    made = []
    col = colours(cmp.names)
    flags = getattr(cmp, "flags", {})
    human = getattr(cmp, "human", set())
    for m in tradeoff_metrics(cmp.metrics):
        pts = [(n, cmp.result(n, "recall"), cmp.result(n, m)) for n in cmp.names]
        pts = [p for p in pts if cmp.value(p[0], "recall") is not None
               and cmp.value(p[0], m) is not None]
        if len(pts) < 2:
            continue
        fig, ax = plt.subplots(figsize=(6.0, 3.6))
        for n, rx, ry in pts:
            flagged = (n, m) in flags
            ax.errorbar(rx.value, ry.value, xerr=_err(rx), yerr=_err(ry),
                        fmt="*" if n in human else "o", capsize=3, color=col[n],
                        markersize=10 if n in human else 6, mfc="white" if flagged else col[n],
                        label=text_label(n) + (f" ({ry.status.replace('-', ' ')})" if flagged
                                               else "")
                        + (" (human, not fitted)" if n in human else ""))
        fit = [(rx.value, ry.value) for n, rx, ry in pts if (n, m) not in flags and n not in human]
        info = {"metric": m, "file": f"{m}_vs_recall.png", "n": len(pts), "fit_n": len(fit),
                "shared_images": shared_images(cmp),
                "human": [n for n, _, _ in pts if n in human]}
        _fit_line(ax, fit, info)
        title = f"{label(m)} vs Recall\n({fit_caption(info)})"
        ax.set_title(title, fontsize=8, wrap=True)
        ax.set_xlabel(f"{label('recall')} (95% interval)", fontsize=8)
        ax.set_ylabel(f"{label(m)} (95% interval)", fontsize=8)
        ax.tick_params(labelsize=7)
        _legend(ax)
        fig.tight_layout()
        _save(fig, out / info["file"])
        plt.close(fig)
        made.append(info)
    return made


def _fit_line(ax, fit: list[tuple[float, float]], info: dict) -> None:
    """Fit the captioning sets' points; draw the line only when it means something (enough
    sets and shared images, a slope with p < MAX_P); ``info`` gets slope, R², p, drawn."""
    x = np.array([p[0] for p in fit], float)
    y = np.array([p[1] for p in fit], float)
    enough = info["shared_images"] is None or info["shared_images"] >= MIN_FIT_IMAGES
    if len(fit) < MIN_FIT or not enough or np.ptp(x) == 0:
        return
    slope, icpt, r2, p = regression(x, y)
    info.update(slope=slope, r2=r2, p=p, drawn=p < MAX_P)
    if info["drawn"]:
        xs = np.linspace(x.min(), x.max(), 20)
        ax.plot(xs, slope * xs + icpt, "--", color="grey", linewidth=1)


def people_categories(instances: dict | None, k: int = 10) -> list[str]:
    """The k categories that co-occur most often with 'person' in the images."""
    if not instances:
        return []
    counts: Counter = Counter()
    for cats in instances.values():
        if "person" in cats:
            counts.update(c for c in cats if c != "person")
    return [c for c, _ in counts.most_common(k)]


def category_series(cmp, cats: list[str]) -> dict[str, list[dict]]:
    """``{set: [{"value", "ci", "why"} per category]}``: each category's recall difference
    (man − woman) with its 95% interval, or why it has none (below ``--min-images``)."""
    series: dict[str, list[dict]] = {}
    for n in cmp.names:
        r = cmp.results[n].results.get("recall_disparity")
        if r is None or r.skipped:
            continue
        rows = r.extra.get("per_category", [])
        cis = r.extra.get("parts_ci") or [None] * len(rows)
        table = {row["category"]: (row["diff_man_minus_woman"], ci) for row, ci in zip(rows, cis)}
        few, k = r.extra.get("below_min_images", {}), r.extra.get("min_images")
        cells = []
        for c in cats:
            if c in table and table[c][0] == table[c][0]:
                ci = table[c][1]
                ok = ci is not None and ci[0] is not None
                cells.append({"value": table[c][0], "ci": list(ci) if ok else None,
                              "why": "" if ok else "no interval (no resamples)"})
            elif c in few:
                short = [f"{cnt:,} images of {who}" for cnt, who in zip(few[c], ("men", "women"))
                         if k is None or cnt < k]
                cells.append({"value": None, "ci": None,
                              "why": f"n/a: {', '.join(short)} (under --min-images {k})"})
            else:
                cells.append({"value": None, "ci": None,
                              "why": "n/a: in no image of a man or a woman"})
        series[n] = cells
    return series


def disparity_plot(cmp, out: Path) -> dict | None:
    """Grouped bars, one per set and category, each with its 95% interval; a category with
    no bar for any set says why under its name."""
    cats = people_categories(getattr(cmp.annotations, "instances", None))
    series = category_series(cmp, cats)
    if not cats or not series:
        return None
    plt = _plt()
    col = colours(cmp.names)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / len(series)
    xs = np.arange(len(cats))
    for i, (n, cells) in enumerate(series.items()):
        vals = [np.nan if c["value"] is None else c["value"] for c in cells]
        err = [[0 if c["ci"] is None else max(0.0, c["value"] - c["ci"][0]) for c in cells],
               [0 if c["ci"] is None else max(0.0, c["ci"][1] - c["value"]) for c in cells]]
        ax.bar(xs + i * width, vals, width, yerr=err, capsize=2, error_kw={"linewidth": 0.7},
               label=text_label(n), color=col[n])
    ax.axhline(0, color="black", linewidth=0.6)
    for i, c in enumerate(cats):  # say why a category has no bar instead of leaving a gap
        if all(cells[i]["value"] is None for cells in series.values()):
            ax.text(xs[i] + 0.4 - width / 2, 0, "n/a:\nunder\n--min-images", ha="center",
                    va="bottom", fontsize=6, color="grey")
    ax.set_xticks(xs + 0.4 - width / 2, [text_label(c) for c in cats], rotation=35, ha="right",
                  fontsize=8)
    ax.set_ylabel("recall(man) - recall(woman)")
    k = next((r.extra.get("min_images") for n in series
              if (r := cmp.results[n].results.get("recall_disparity")) is not None), None)
    ax.set_title("Per-category recall difference (95% intervals), top-10 categories co-occurring "
                 f"with people\n(n/a: fewer than --min-images {k} images of men or of women; "
                 "audit compare --min-images N)", fontsize=8)
    _legend(ax)
    fig.tight_layout()
    _save(fig, out / "recall_diff_by_category.png")
    plt.close(fig)
    return {"file": "recall_diff_by_category.png", "categories": cats, "series": series}
