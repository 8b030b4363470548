"""``audit compare``: the GCE paper's Table 1 view over several caption sets.

Audits every set with the same annotations, marks the best and worst value of
each metric (direction per metric below), prints a rich table and writes
``report.md`` + ``report.html`` with plots (see :mod:`capaudit.audit.report`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rich.table import Table

from capaudit.audit.runner import DEFAULTS, run_audit

# +1: higher is better, -1: lower is better, 0: descriptive only
DIRECTION = {"vocab": +1, "length": 0, "recall": +1, "gender_error": -1,
             "recall_disparity": -1, "chair_s": -1, "chair_i": -1, "lic": -1,
             "chair_s_corrected": -1, "chair_i_corrected": -1, "recall_corrected": +1}
LABEL = {"vocab": "Vocab", "length": "Length", "recall": "Recall", "gender_error": "Gender err",
         "recall_disparity": "Recall disp.", "chair_s": "CHAIR_s", "chair_i": "CHAIR_i",
         "lic": "LIC"}


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

    def value(self, name: str, metric: str):
        r = self.results[name].results.get(metric)
        return None if r is None or r.skipped else r.value


def rank(cmp: Comparison) -> None:
    for m in cmp.metrics:
        d = DIRECTION.get(m, 0)
        vals = {n: cmp.value(n, m) for n in cmp.names}
        vals = {n: v for n, v in vals.items() if v is not None}
        if d == 0 or len(vals) < 2 or len(set(vals.values())) < 2:
            continue
        order = sorted(vals, key=lambda n: vals[n] * d)
        cmp.worst[m], cmp.best[m] = order[0], order[-1]


def compare_sets(store, names: Sequence[str], report_dir: Path | None = Path("report"),
                 cfg: dict | None = None) -> Comparison:
    cfg = {**DEFAULTS, **(cfg or {})}
    results = run_audit(store, names, cfg)
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
    if report_dir is not None:
        from capaudit.audit.report import write_report
        cmp.report_dir = Path(report_dir)
        write_report(cmp, cmp.report_dir, cfg)
    return cmp


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
        arrow = {1: " ↑", -1: " ↓", 0: ""}[DIRECTION.get(m, 0)]
        table.add_column(LABEL.get(m, m) + arrow, justify="right")
    for n in cmp.names:
        cells = []
        for m in cmp.metrics:
            r = cmp.results[n].results.get(m)
            text = fmt_value(m, r) if with_ci else fmt_value(m, r).split(" [")[0]
            if cmp.best.get(m) == n:
                text = f"[bold green]{text}[/]"
            elif cmp.worst.get(m) == n:
                text = f"[bold red]{text}[/]"
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
        console.print(f"[yellow]{n}: {m} not computed: {why}[/]")
