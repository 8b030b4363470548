"""``audit compare``: the GCE paper's Table 1 view over several caption sets.

Audits every set with the same annotations, marks the best and worst value of
each metric (direction from the metric's spec), prints a rich table and writes
``report.md`` + ``report.html`` with plots (see :mod:`capaudit.audit.report`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rich.table import Table
from rich.text import Text

from capaudit.audit.metrics.spec import arrow, direction, label
from capaudit.audit.runner import DEFAULTS, run_audit


@dataclass
class Comparison:
    names: list[str]
    metrics: list[str]
    results: dict[str, Any]               # name -> AuditResult
    best: dict[str, str] = field(default_factory=dict)
    worst: dict[str, str] = field(default_factory=dict)
    report_dir: Path | None = None
    annotations: Any = None
    run_id: int | None = None
    parent_costs: list[dict] = field(default_factory=list)
    amplifications: list[tuple[str, str, list]] = field(default_factory=list)
    disparities: dict[str, dict] = field(default_factory=dict)   # set -> {by: Disparity}

    def value(self, name: str, metric: str):
        r = self.results[name].results.get(metric)
        return None if r is None or r.skipped else r.value


def rank(cmp: Comparison) -> None:
    for m in cmp.metrics:
        d = direction(m)
        vals = {n: cmp.value(n, m) for n in cmp.names}
        vals = {n: v for n, v in vals.items() if v is not None}
        if d == 0 or len(vals) < 2 or len(set(vals.values())) < 2:
            continue
        order = sorted(vals, key=lambda n: vals[n] * d)
        cmp.worst[m], cmp.best[m] = order[0], order[-1]


def compare_sets(store, names: Sequence[str], report_dir: Path | None = Path("report"),
                 cfg: dict | None = None, **hooks) -> Comparison:
    """Audit ``names`` (``hooks``: ``on_target`` / ``on_progress`` of :func:`run_audit`),
    rank them and write the report."""
    cfg = {**DEFAULTS, **(cfg or {})}
    results = run_audit(store, names, cfg, **hooks)
    annotations = results.pop("_annotations")
    run_id = results.pop("_run_id", None)
    set_names = list(results)
    metrics: list[str] = []
    for res in results.values():
        for m in res.results:
            if m not in metrics:
                metrics.append(m)
    cmp = Comparison(set_names, metrics, results, annotations=annotations, run_id=run_id)
    rank(cmp)
    cmp.parent_costs = parent_costs(store, cmp)
    if cfg.get("disparity"):
        from capaudit.audit.disparity import compare_disparities
        cmp.disparities = compare_disparities(store, set_names, annotations, cfg, run_id)
    if report_dir is not None:
        from capaudit.audit.report import write_report
        cmp.report_dir = Path(report_dir)
        write_report(cmp, cmp.report_dir, cfg)
    return cmp


def parent_costs(store, cmp: Comparison) -> list[dict]:
    """What a filter cost, for each compared set whose parent is compared too.

    Recall over the parent's captions counts every caption the filter dropped
    as mentioning nothing: the honest recall cost, which the filtered set's
    own recall (over surviving captions only) hides.
    """
    out = []
    if store is None:
        return out
    for name in cmp.names:
        info = store.find_set(name)
        if info is None or not info.parent or info.parent not in cmp.names:
            continue
        if info.format == "downstream":  # captions of a model trained on the parent set
            from capaudit.audit.amplification import amplification
            cmp.amplifications.append((info.parent, name, amplification(
                cmp.results[info.parent].results, cmp.results[name].results)))
            continue
        child, parent = cmp.results[name].results, cmp.results[info.parent].results
        row = {"set": name, "parent": info.parent,
               "captions": cmp.results[name].meta.get("n_captions"),
               "parent_captions": cmp.results[info.parent].meta.get("n_captions")}
        rc, rp = child.get("recall"), parent.get("recall")
        if rc and rp and not rc.skipped and not rp.skipped and rp.n:
            row["recall_parent_basis"] = rc.value * rc.n / rp.n
            row["recall_parent"] = rp.value
        for m in ("length", "chair_s", "gender_error"):
            if m in child and m in parent and not child[m].skipped and not parent[m].skipped:
                row[m] = (parent[m].value, child[m].value)
        out.append(row)
    return out


def fmt_cost(row: dict) -> str:
    text = (f"{row['set']} vs parent {row['parent']}: captions {row['captions']:,} of "
            f"{row['parent_captions']:,} kept")
    if "recall_parent_basis" in row:
        text += (f"; recall over the parent's captions {row['recall_parent']:.2f} -> "
                 f"{row['recall_parent_basis']:.2f} (dropped captions count as no mention)")
    for m in ("length", "chair_s", "gender_error"):
        if m in row:
            text += f"; {m} {row[m][0]:.2f} -> {row[m][1]:.2f}"
    return text


def fmt_value(metric: str, r) -> str:
    if r is None:
        return "-"
    if r.skipped:
        return "n/a"
    if r.value is None:
        return "-"
    if metric == "vocab":
        return f"{r.value:,.0f}"
    ci = ""
    if r.ci_low is not None and r.ci_high is not None:
        ci = f" [{r.ci_low:.2f}, {r.ci_high:.2f}]"
    return f"{r.value:.2f}{ci}"


def compare_table(cmp: Comparison, with_ci: bool = True) -> Table:
    table = Table(title="capaudit compare (best in green, worst in red; 95% bootstrap CI)")
    table.add_column("set")
    for m in cmp.metrics:
        table.add_column(label(m) + arrow(m), justify="right")
    for n in cmp.names:
        cells = []
        for m in cmp.metrics:
            r = cmp.results[n].results.get(m)
            text = fmt_value(m, r) if with_ci else fmt_value(m, r).split(" [")[0]
            if cmp.best.get(m) == n:
                text = Text(text, style="bold green")
            elif cmp.worst.get(m) == n:
                text = Text(text, style="bold red")
            cells.append(text)
        table.add_row(n, *cells)
    return table


def print_compare(cmp: Comparison, console=None) -> None:
    from capaudit.cli.common import console as default_console

    console = console or default_console
    console.print(compare_table(cmp))
    skipped = {(n, m): r.skipped for n in cmp.names for m, r in cmp.results[n].results.items()
               if r.skipped}
    for (n, m), why in skipped.items():
        console.print(Text(f"{n}: {m} not computed: {why}", style="yellow"))
    if cmp.disparities:
        from capaudit.audit.disparity import disparity_rows
        heads, rows = disparity_rows(cmp.disparities)
        if heads:
            table = Table(title="Gaps between groups of images (95% bootstrap CI)")
            for col in ("set", "metric", *heads):
                table.add_column(col, justify="left" if col in ("set", "metric") else "right")
            for row in rows:
                table.add_row(*row)
            console.print(table)
    for row in cmp.parent_costs:
        console.print(fmt_cost(row))
    for up, down, rows in cmp.amplifications:
        table = Table(title=f"amplification: {down} (downstream) - {up} (upstream)")
        for col in ("metric", "upstream", "downstream", "delta", "95% CI"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for r in rows:
            if r.delta is None:
                continue
            ci = f"[{r.ci_low:.2f}, {r.ci_high:.2f}]" if r.ci_low is not None else "-"
            table.add_row(r.metric, f"{r.upstream:.2f}", f"{r.downstream:.2f}",
                          f"{r.delta:+.2f}", ci)
        console.print(table)
