"""Which options each filter takes, resolved defaults < YAML (``filter`` section) < given.

Shared by ``capaudit filter run`` and :meth:`capaudit.api.AuditStore.filter`, so
both refuse an option a filter does not use with the same one-line error.
"""

from __future__ import annotations

from pathlib import Path

def filter_options(name: str, given: dict, yaml_path: Path | None = None) -> dict:
    """Resolve defaults < YAML (section ``filter``) < CLI for filter ``name``.

    The options a filter understands are the keys of its declared ``defaults`` (one place:
    the filter's module); an option of another filter is refused, naming the options."""
    from capaudit.core.config import resolve
    from capaudit.errors import InputError
    from capaudit.filters.base import FILTERS

    cls = FILTERS.get(name)
    allowed = set(cls.defaults)
    extra = sorted(k for k, v in given.items() if v is not None and k not in allowed)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise InputError(f"filter '{name}' does not use {flags}",
                         fix=f"its options: {', '.join('--' + k.replace('_', '-') for k in sorted(allowed))}")
    cfg = resolve(dict(cls.defaults), yaml_path, {k: v for k, v in given.items() if k in allowed},
                  section="filter")
    return {k: v for k, v in cfg.items() if k in cls.defaults}
