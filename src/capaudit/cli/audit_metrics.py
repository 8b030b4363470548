"""``capaudit audit metrics``: every registered metric and its spec (plugins included)."""

from __future__ import annotations

from pathlib import Path

import typer

from capaudit.cli.common import console


def metric_rows() -> list[dict]:
    """The spec of every registered metric, in registration order."""
    from capaudit.metrics.spec import specs

    return [cls.spec() for cls in specs()]


def metrics_command(json_out: Path = typer.Option(None, "--json", help="Write the specs as JSON"),
                    ) -> None:
    """List every metric: description, direction, criterion and what it needs."""
    from rich.table import Table

    rows = metric_rows()
    if json_out:
        from capaudit.core.config import write_json

        write_json(json_out, {"metrics": rows})
    arrow = {1: "↑", -1: "↓", 0: "·"}
    table = Table(title="capaudit metrics (↑ higher is better, ↓ lower is better)")
    # a narrow terminal gets two columns (the six-column table squeezed the description to
    # nothing at 80 columns); a wide one gets a column per field
    wide = console.width >= 140
    cols = ("name", "dir", "criterion", "needs", "default", "description") if wide \
        else ("metric", "description")
    for col in cols:
        table.add_column(col, no_wrap=wide and col != "description", overflow="fold")
    for r in rows:
        flags = ("yes" if r["default"] else "no") + ("" if r["streams"] else " (--lic)")
        needs = ", ".join(r["needs"]) or "-"
        desc = r["description"] + (" [corrected mode too]" if r["corrected"] else "")
        if wide:
            table.add_row(r["name"], arrow[r["direction"]], r["criterion"], needs,
                          flags, desc)
        else:
            table.add_row(f"{r['name']} {arrow[r['direction']]}\n{r['criterion']}",
                          f"{desc}\nneeds: {needs}; default: {flags}")
    console.print(table)
    if json_out:
        console.print(f"JSON: {json_out}")
