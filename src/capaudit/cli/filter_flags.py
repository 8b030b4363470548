"""``filter run``'s filter options, generated from the filters' declared defaults.

The flags (``--action``, ``--chair-gt`` ...) are the union of the built-in filters'
option keys (:func:`capaudit.filters.declared.builtin_keys`), typed and explained
by :data:`capaudit.filters.declared.OPTIONS`: a new default declared there becomes
a flag with no edit here. Any filter's option, a plugin's included, can also be set
as ``--filter.KEY VALUE``; :class:`OverridesCommand` takes those out of the command
line before click parses it, so every other unknown option is refused as before.
"""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable

import typer
from typer.core import TyperCommand

from capaudit.filters.declared import DEFAULTS, OPTIONS, Option, builtin_keys
from capaudit.filters.options import PREFIX, split_overrides

__all__ = ["OverridesCommand", "with_filter_options", "current_overrides", "given_options",
           "OVERRIDES_HELP"]

OVERRIDES_HELP = (f"Any filter's option, a plugin's too: {PREFIX}KEY VALUE (or "
                  f"{PREFIX}KEY=VALUE), typed from the filter's default; it wins over the "
                  "flag and the --config YAML 'filter:' section.")

# the command's --filter.KEY pairs, set while its callback runs (typer's callback takes
# only declared parameters, and a ctx parameter would read as a filter option)
_OVERRIDES: ContextVar[list[tuple[str, str]] | None] = ContextVar("filter_overrides",
                                                                  default=None)


class OverridesCommand(TyperCommand):
    """A typer command that accepts ``--filter.KEY VALUE`` pairs beside its own options."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        rest, pairs = split_overrides(list(args))
        ctx.meta["filter_overrides"] = pairs
        return super().parse_args(ctx, rest)

    def invoke(self, ctx) -> Any:
        token = _OVERRIDES.set(ctx.meta.get("filter_overrides", []))
        try:
            return super().invoke(ctx)
        finally:
            _OVERRIDES.reset(token)


def current_overrides() -> list[tuple[str, str]]:
    """The ``(KEY, VALUE)`` pairs of the running command's ``--filter.KEY VALUE``."""
    return list(_OVERRIDES.get() or [])


def _parameter(key: str) -> inspect.Parameter:
    opt = OPTIONS.get(key) or Option(str)
    flag = "--" + key.replace("_", "-")
    # a switch that is on by default in some filter needs its --no- form; one that is off
    # everywhere does not (and a long --no-... would squeeze the help's other flags)
    on_somewhere = any(d.get(key) is True for d in DEFAULTS.values())
    decl = f"{flag}/--no-{flag[2:]}" if opt.type is bool and on_somewhere else flag
    return inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, annotation=opt.type,
                             default=typer.Option(None, decl, help=opt.help))


def with_filter_options(after: str) -> Callable[[Callable], Callable]:
    """Give a ``def f(..., **options)`` command one parameter per built-in filter option,
    listed after its parameter ``after``; the explicit parameters keep their names (a
    filter option of the same name, such as ``seed``, stays the command's own)."""
    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values()
               if p.kind is not inspect.Parameter.VAR_KEYWORD]
        names = {p.name for p in own}
        generated = [_parameter(k) for k in builtin_keys() if k not in names]
        at = [p.name for p in own].index(after) + 1
        fn.__signature__ = sig.replace(parameters=own[:at] + generated + own[at:])
        return fn
    return deco


def given_options(options: dict[str, Any]) -> dict[str, Any]:
    """The flags' values as the filters take them (paths as strings, None: not given)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}
