"""A plugin installed as another package would be, for the tests of the registries' entry
points: a module plus a real ``.dist-info`` with ``entry_points.txt`` on ``sys.path``; the
registry is restored afterwards. Used by the metric and filter plugin tests alike."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator, Mapping


@contextlib.contextmanager
def installed_plugin(site: Path, monkeypatch, registry, module: str, source: str,
                     group: str, entries: Mapping[str, str]) -> Iterator[Path]:
    """``module`` (a package holding ``source``) with its entry points ``{name: "module:attr"}``
    in ``capaudit.<group>``, found by ``registry`` until the block ends; yields ``site``."""
    from capaudit.core.registry import rescan_plugins

    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(source)
    dist = module.replace("_", "-")
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[capaudit.{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    monkeypatch.syspath_prepend(str(site))
    saved = dict(registry._entries)
    registry._plugins_loaded = False
    rescan_plugins()
    try:
        yield site
    finally:
        registry._entries.clear()
        registry._entries.update(saved)
        registry._plugins_loaded = False
        rescan_plugins()
        sys.modules.pop(module, None)
