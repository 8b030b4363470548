"""``capaudit plugins``: the installed plugins (entry points of other packages), loaded one
by one, each with its package and whether it works.

Why: a plugin that fails to load is left out of every command with a one-line warning
(:func:`capaudit.core.registry.plugin_broken`); this is where a user sees all of them at
once, the broken ones with their error, and exit code 2 when one is broken (a CI check).
"""

from __future__ import annotations

import importlib

import typer
from rich.table import Table

from capaudit.cli.common import console

# entry-point group -> the registry that reads it ("module:attribute")
REGISTRIES = {"capaudit.metrics": "capaudit.metrics.base:METRICS",
              "capaudit.readers": "capaudit.io.readers.base:READERS",
              "capaudit.filters": "capaudit.filters.base:FILTERS",
              "capaudit.backends": "capaudit.llm.base:BACKENDS"}


def plugin_rows() -> list[tuple[str, str, str, str, str]]:
    """``(group, name, package, target, status)`` of every capaudit entry point installed;
    status ``ok``, ``broken: ERROR`` or ``unknown group`` (no registry reads it)."""
    from capaudit.core.registry import BROKEN, _capaudit_entry_points
    from capaudit.errors import CapauditError

    rows = []
    for group, eps in sorted(_capaudit_entry_points().items()):
        where = REGISTRIES.get(group)
        registry = None
        if where:
            module, _, attr = where.partition(":")
            registry = getattr(importlib.import_module(module), attr)
        for ep in sorted(eps, key=lambda e: e.name):
            dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
            status = "unknown group (no capaudit registry reads it)"
            if registry is not None:
                try:
                    if (group, ep.name) not in BROKEN:   # left out earlier in this process
                        registry.get(ep.name)
                        status = "ok"
                except CapauditError as exc:
                    status = f"broken: {exc}"
                if (group, ep.name) in BROKEN:
                    status = f"broken: {BROKEN[(group, ep.name)][2]}"
            rows.append((group.removeprefix("capaudit."), ep.name, dist, ep.value, status))
    return rows


def plugins() -> None:
    """List the installed plugins and whether each loads (exit 2 when one is broken)."""
    rows = plugin_rows()
    if not rows:
        console.print("no plugins installed (entry points in the capaudit.metrics, "
                      "capaudit.readers, capaudit.filters or capaudit.backends groups)")
        return
    table = Table("group", "name", "package", "entry point", "status")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    broken = sum(r[4].startswith("broken") for r in rows)
    if broken:
        console.print(f"{broken} broken plugin(s): left out of every command until fixed")
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("plugins")(plugins)
