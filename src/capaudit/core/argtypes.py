"""The Python API's arguments checked against their annotations, at the boundary.

Why: ``capaudit.open(3)``, ``store.audit("nic", metrics=5)`` or ``store.export(5, ...)``
raised a TypeError, an AttributeError or a DuckDB ConversionException from deep inside
(``'int' object is not iterable``, ``Could not convert string 'nic' to INT32``), or worse
ran on: ``compare("nic")`` compared the sets ``n``, ``i`` and ``c``. The annotations
already say what each argument takes; :func:`checked_arguments` reads them once and
refuses a value of another type with one :class:`~capaudit.errors.UsageError` naming the
call, the argument, what it takes and what it got.

Understood: ``str``, ``Path`` (a text or ``os.PathLike``), ``bool``, ``int`` (never a
bool), ``float`` (an int too), ``None``, ``Any``, unions, ``Sequence[X]`` (a list or tuple
of X, never a text: one name is a text), ``Mapping``; other classes by ``isinstance``.
``**options`` stay with the code that knows them (unknown keys and their ranges are checked
where the configuration is resolved).
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import os
import types
import typing
from pathlib import PurePath
from typing import Any, Callable

from capaudit.errors import UsageError

__all__ = ["checked_arguments", "checked_methods", "matches", "describe"]


def _is_union(hint) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def matches(value, hint) -> bool:
    """Whether ``value`` is of the annotated type ``hint`` (the subset described above)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    if hint is None or hint is type(None):
        return value is None
    if _is_union(hint):
        return any(matches(value, h) for h in typing.get_args(hint))
    origin = typing.get_origin(hint)
    if origin in (abc.Sequence, list, tuple):
        inner = typing.get_args(hint)[:1] or (Any,)
        return isinstance(value, (list, tuple)) and all(matches(v, inner[0]) for v in value)
    if origin in (abc.Mapping, dict):
        return isinstance(value, abc.Mapping)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return isinstance(value, (str, os.PathLike))
    return isinstance(hint, type) and isinstance(value, hint)


def describe(hint) -> str:
    """``hint`` in words (``a text or a path``, ``a list of texts``)."""
    if _is_union(hint):   # each wording once ("a text or a path", not "... or a text")
        return " or ".join(dict.fromkeys(describe(h) for h in typing.get_args(hint)))
    origin = typing.get_origin(hint)
    if origin in (abc.Sequence, list, tuple):
        inner = typing.get_args(hint)[:1]
        return "a list of " + (describe(inner[0]).removeprefix("a ").removeprefix("an ") + "s"
                               if inner else "values")
    if origin in (abc.Mapping, dict):
        return "a mapping"
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return "a path"
    return {str: "a text", bool: "True or False", int: "a whole number", float: "a number",
            type(None): "None", None: "None"}.get(hint, f"a {getattr(hint, '__name__', hint)}")


def _shown(value) -> str:
    import reprlib

    return f"{type(value).__name__} {reprlib.repr(value)}"


def checked_arguments(fn: Callable) -> Callable:
    """``fn`` with its arguments checked against its annotations before it runs."""
    sig = inspect.signature(fn)
    hints: dict[str, Any] = {}
    where = fn.__qualname__.replace("AuditStore.", "store.").replace("<locals>.", "")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not hints:
            hints.update(typing.get_type_hints(fn))
            hints.setdefault("__done__", True)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:   # a missing or an unexpected argument
            raise UsageError(f"{where}(): {exc}", fix="see help(capaudit)") from None
        for name, value in bound.arguments.items():
            param = sig.parameters[name]
            if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL) or name == "self":
                continue
            hint = hints.get(name, Any)
            if not matches(value, hint):
                raise UsageError(f"{where}(): {name} must be {describe(hint)}, not "
                                 f"{_shown(value)}", fix=f"pass {name} as {describe(hint)}")
        return fn(*args, **kwargs)

    return call


def checked_methods(cls):
    """Class decorator: every public method (and the constructor) of ``cls`` checks its
    arguments against its annotations (:func:`checked_arguments`)."""
    for name, value in list(vars(cls).items()):
        if callable(value) and (not name.startswith("_") or name == "__init__"):
            setattr(cls, name, checked_arguments(value))
    return cls
