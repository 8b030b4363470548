"""Which options each filter takes, resolved defaults < YAML (``filter`` section) < given.

Shared by ``capaudit filter run`` and :meth:`capaudit.api.AuditStore.filter`, so
both refuse an option a filter does not use with the same one-line error.

``--filter.KEY VALUE`` overrides (as spaCy's ``--section.key value``) reach any
filter, a plugin's too, without a flag of their own: :func:`split_overrides`
takes them out of the command line, :func:`typed_overrides` types each value
from the filter's declared default, and they win over the flag and the YAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from capaudit.errors import InputError

PREFIX = "--filter."
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def filter_options(name: str, given: dict, yaml_path: Path | None = None,
                   overrides: Mapping[str, str] | None = None, seed: int | None = None) -> dict:
    """Resolve defaults < YAML (section ``filter``) < given < ``overrides`` for ``name``;
    ``seed``: the run's, given to a filter that draws (one with a ``seed`` option).

    The options a filter understands are the keys of its declared ``defaults`` (one place:
    :mod:`capaudit.filters.declared` for the built-ins, the class for a plugin); an option
    of another filter is refused, naming the options. ``overrides`` are the raw strings of
    ``--filter.KEY VALUE`` (typed here; ``null`` may reset a key whose default is None)."""
    from capaudit.core.config import resolve
    from capaudit.filters.base import FILTERS

    cls = FILTERS.get(name)
    if seed is not None and "seed" in cls.defaults:
        given = {**given, "seed": seed}
    allowed = set(cls.defaults)
    typed = typed_overrides(name, cls.defaults, overrides or {})  # a bad key fails first
    extra = sorted(k for k, v in given.items() if v is not None and k not in allowed)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise InputError(f"filter '{name}' does not use {flags}",
                         fix=f"its options: {', '.join('--' + k.replace('_', '-') for k in sorted(allowed))}")
    rules = _rules(name, cls)
    unset = {r.key: None for r in rules}   # None through the merge: no one set it
    cfg = resolve({**cls.defaults, **unset}, yaml_path,
                  {k: v for k, v in given.items() if k in allowed}, section="filter")
    for key in cls.defaults:
        if cfg.get(key) is not None:
            cfg[key] = _checked(key, cfg[key], cls.defaults[key])
    cfg.update(typed)
    out = Resolved({k: v for k, v in cfg.items() if k in cls.defaults})
    for rule in rules:
        if out[rule.key] is not None:
            continue
        if any(out.get(k) for k in rule.when):
            out[rule.key] = rule.value
            out.chosen[rule.key] = f"{rule.key.replace('_', ' ')} {rule.value}: {rule.why}"
        else:
            out[rule.key] = cls.defaults[rule.key]
    return out


class Resolved(dict):
    """A filter's resolved options; ``chosen``: ``{key: why}`` for each option whose value a
    rule of :data:`capaudit.filters.declared.CHOSEN` chose because another option was given
    (saved with the run's config and shown in its summary)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.chosen: dict[str, str] = {}


def _rules(name: str, cls) -> tuple:
    """The :data:`~capaudit.filters.declared.CHOSEN` rules of filter ``name`` whose options
    its class declares (a plugin's rules are none)."""
    from capaudit.filters.declared import CHOSEN

    return tuple(r for r in CHOSEN.get(name, ()) if cls.defaults.get(r.key) is not None
                 and all(k in cls.defaults for k in r.when))


def make_filter(name: str, opts: Mapping, *args):
    """The filter ``name`` built on resolved ``opts`` (and ``args``, e.g. its evidence),
    knowing which of them a rule chose (:class:`Resolved`)."""
    from capaudit.filters.base import FILTERS

    filt = FILTERS.get(name)(*args, **{k: v for k, v in opts.items() if v is not None})
    filt.chosen = dict(getattr(opts, "chosen", {}))
    return filt


def split_overrides(args: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Take ``--filter.KEY VALUE`` and ``--filter.KEY=VALUE`` out of ``args``; returns the
    rest (parsed as usual, so a mistyped flag is still refused) and the ``(KEY, VALUE)``
    pairs. A ``--filter.KEY`` followed by another ``--option`` or nothing means ``true``;
    nothing after ``--`` is taken."""
    rest: list[str] = []
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            rest += args[i - 1:]
            break
        if not arg.startswith(PREFIX):
            rest.append(arg)
            continue
        key, eq, value = arg[len(PREFIX):].partition("=")
        if not eq:
            if i < len(args) and not args[i].startswith("--"):
                value, i = args[i], i + 1
            else:
                value = "true"
        pairs.append((key, value))
    return rest, pairs


def typed_overrides(name: str, defaults: Mapping[str, Any],
                    pairs: Mapping[str, str] | list[tuple[str, str]]) -> dict:
    """Type each ``(KEY, VALUE)`` from the default of KEY (``some-key`` = ``some_key``).

    An unknown key is refused naming the filter's options (with a did-you-mean); a value
    that does not parse names the key, the type expected and the value."""
    out = {}
    for raw_key, raw in (pairs.items() if isinstance(pairs, Mapping) else pairs):
        key = raw_key.replace("-", "_")
        if key not in defaults:
            import difflib

            known = sorted(defaults)
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {PREFIX}{close[0]}? " if close else ""
            raise InputError(f"filter '{name}' has no option '{raw_key}'",
                             fix=f"{hint}its options: "
                                 f"{', '.join(PREFIX + k for k in known) or 'none'}")
        out[key] = parse_value(key, raw, defaults[key])
    return out


def value_type(key: str, default: Any) -> type:
    """The type a value of ``key`` must have: its default's, or, for a None default,
    the built-in option's declared type (else a string)."""
    if default is not None:
        return type(default)
    from capaudit.filters.declared import OPTIONS

    opt = OPTIONS.get(key)
    return str if opt is None or opt.type is Path else opt.type


def parse_value(key: str, raw: str, default: Any) -> Any:
    """``raw`` as the type of ``default``: bool (true/false/1/0/yes/no), int, float, a
    comma list for a list or tuple default, a string; ``null``/``none`` -> None where
    the default is None."""
    kind = value_type(key, default)
    if default is None and raw.strip().lower() in ("null", "none"):
        return None
    try:
        if isinstance(default, (list, tuple)):
            item = type(default[0]) if default else str
            return kind(_scalar(item, s.strip()) for s in raw.split(",") if s.strip())
        return _scalar(kind, raw)
    except ValueError:
        what = f"a comma list of {_name(item)}" if isinstance(default, (list, tuple)) \
            else _name(kind)
        raise InputError(f"{PREFIX}{key} expects {what}, got '{raw}'",
                         fix=f"e.g. {PREFIX}{key} {_example(kind, default)}") from None


def _checked(key: str, value: Any, default: Any) -> Any:
    """A YAML ``filter:`` (or API) value of an option typed bool, int or float: a string read
    as ``--filter.KEY`` reads it, a value of that type kept, anything else one line
    (``min_coverage: abc`` was a ValueError traceback, ``negation: maybe`` read as true)."""
    kind = value_type(key, default)
    if kind not in (bool, int, float) or isinstance(default, (list, tuple)):
        return value
    number = (int, float) if kind is float else int
    if isinstance(value, bool) if kind is bool else \
            isinstance(value, number) and not isinstance(value, bool):
        return value
    try:
        if isinstance(value, str):
            return _scalar(kind, value)
    except ValueError:
        pass
    raise InputError(f"filter option {key} expects {_name(kind)}, got {value!r}",
                     fix=f"e.g. {key}: {_example(kind, default)} in the YAML 'filter:' section")


def _scalar(kind: type, raw: str) -> Any:
    if kind is bool:
        low = raw.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(raw)
    if kind in (int, float):   # the one number parser: ASCII digits, finite (no nan)
        from capaudit.core.ranges import number_problem

        number, problem = number_problem(raw, integer=kind is int)
        if problem:
            raise ValueError(raw)
        return kind(number)
    if kind is str:
        return raw
    raise ValueError(raw)  # a mapping or other structure: the YAML 'filter:' section


def _name(kind: type) -> str:
    return {bool: "true or false", int: "an integer", float: "a number",
            str: "a string"}.get(kind, f"a {kind.__name__} (set it in the YAML 'filter:' section)")


def _example(kind: type, default: Any) -> str:
    if isinstance(default, (list, tuple)):
        return "a,b"
    return {bool: "true", int: "3", float: "0.5"}.get(kind, "VALUE")
