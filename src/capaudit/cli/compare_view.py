"""The terminal side of ``audit compare`` / ``audit run`` / ``demo``: rich tables and notes.

The comparison itself is computed in :mod:`capaudit.report.compare`; the cell
texts and marks come from :mod:`capaudit.report.cells`, so the terminal
and report.md say the same thing.

Width. The Table 1 layout (one row per set) is used when it fits the console
(80 columns when output is not a terminal); otherwise the table turns (one
row per metric, one column per set), in as many tables as it takes to keep
every set column readable. Intervals sit under their value in both layouts.
Set names and other data print verbatim: the consoles have markup off, style goes on Text.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from capaudit.report.cells import cell, counts, fmt_cost, header, notes

STYLE = {"best": "bold green", "worst": "bold red", "flag": "dim"}
# the mark in words, so it survives NO_COLOR, a pipe and a screen reader (colour is extra)
WORDS = {"best": "(best)", "worst": "(worst)"}
TITLE = ("capaudit compare (95% bootstrap intervals; (best) and (worst) marked only where "
         "intervals do not overlap)")


def title(cmp) -> str | Text:
    """:data:`TITLE` for two sets or more; a single set's audit (``audit run`` of one set)
    is titled as the audit of that set, with nothing to compare."""
    if len(cmp.names) == 1:
        return Text(f"capaudit audit of {cmp.names[0]} (95% bootstrap intervals)")  # verbatim
    return TITLE


def _text(cmp, name: str, metric: str) -> str:
    text, mark = cell(cmp, name, metric)
    text = text.replace(" [", "\n[").replace(" n=", "\nn=").replace(" (", "\n(")
    text = text.replace("not computed (use --lic)", "not computed\n(use --lic)")
    if mark in WORDS:
        text += "\n" + WORDS[mark]
    # the consoles print data verbatim (markup off): style goes on a Text, never as tags
    return Text(text, style=STYLE[mark]) if mark else text


def wide_table(cmp) -> Table:
    """One row per set (the paper's Table 1)."""
    table = Table(title=title(cmp), title_justify="left")
    table.add_column("set", overflow="fold")
    for col in ("captions", "images"):
        table.add_column(col, justify="right")
    for m in cmp.metrics:
        table.add_column(header(m), justify="right")
    for n in cmp.names:
        table.add_row(n, *counts(cmp, n), *[_text(cmp, n, m) for m in cmp.metrics])
    return table


def tall_table(cmp, names: list[str], title: str | Text) -> Table:
    """One row per metric, one column per set in ``names``."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for n in names:
        table.add_column(n, justify="right", overflow="fold")
    cap = [counts(cmp, n) for n in names]
    table.add_row("captions", *[c[0] for c in cap])
    table.add_row("images", *[c[1] for c in cap], end_section=True)
    for m in cmp.metrics:
        table.add_row(header(m), *[_text(cmp, n, m) for n in names])
    return table


def _width(console, table: Table) -> int:
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(100_000), table).maximum


def compare_tables(cmp, console) -> list[Table]:
    """The tables to print so that none is wider than the console."""
    width = console.width
    wide = wide_table(cmp)
    if _width(console, wide) <= width:
        return [wide]
    per = len(cmp.names)
    head = title(cmp)
    while per > 1 and _width(console, tall_table(cmp, cmp.names[:per], head)) > width:
        per -= 1
    chunks = [cmp.names[i:i + per] for i in range(0, len(cmp.names), per)]
    return [tall_table(cmp, c, head if i == 0 else "(continued)") for i, c in enumerate(chunks)]


def print_compare(cmp, console=None) -> None:
    """Tables, then the notes that qualify them, gaps, filter costs and amplification."""
    from capaudit.cli.common import console as default_console

    console = console or default_console
    for table in compare_tables(cmp, console):
        console.print(table)
    for line in notes(cmp):
        console.print(Text(line, style="yellow"))
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
