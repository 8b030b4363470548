"""Every numeric option of every command goes through one parser (core/ranges.py).

Why: click takes ``nan``, ``inf`` and ``-5`` for a float or int option and checks a range
only where the option declares one; and ``nan`` passes every range check (it compares
false with both bounds): ``--max-cost nan`` switched the judge's cost cap off (20 paid
requests), ``--min-n -5`` and ``--max-calls -1`` were taken. Instead of a check at each of
~60 options, :func:`guard_numbers` gives each int and float option of the command about to
run a type that parses with :func:`capaudit.core.ranges.number_problem`: ASCII digits,
finite, within the option's declared range (``min=``/``max=``) or the range
:data:`~capaudit.core.ranges.OPTION_RANGES` holds for its flag; a refusal is a usage error
as click's own (``Invalid value for '--max-cost': must be a number of at least 0, not
'nan'``, exit 2), before any work. YAML and API values meet the same check
(:func:`~capaudit.core.ranges.check_number`) where the configuration is resolved.
"""

from __future__ import annotations

import copy

__all__ = ["guard_numbers"]


def _number_types() -> tuple[type, type]:
    """click's int and float parameter types (typer's vendored click, or click itself)."""
    try:
        from typer._click import types
    except ImportError:  # pragma: no cover - typer without a vendored click
        from click import types
    return types.IntParamType, types.FloatParamType


def _checked(param, integer: bool):
    """A copy of ``param``'s type whose conversion is :func:`number_problem` with its range."""
    from capaudit.core.ranges import OPTION_RANGES, number_problem

    flag = max(param.opts, key=len) if getattr(param, "opts", None) else param.name
    declared = (getattr(param.type, "min", None), getattr(param.type, "max", None))
    lo, hi = declared if declared != (None, None) else OPTION_RANGES.get(flag, (None, None))
    base = type(param.type)

    class Checked(base):   # keeps the metavar and the help's range of the declared type
        def convert(self, value, param_, ctx):
            number, problem = number_problem(value, lo, hi, integer=integer)
            if problem:   # a usage error, as click's own: "Invalid value for '--x': ..."
                self.fail(problem, param_, ctx)
            return number

    checked = copy.copy(param.type)
    checked.__class__ = Checked
    return checked


def guard_numbers(command) -> None:
    """Give every int and float option of ``command`` (and its subcommands) the one parser."""
    int_type, float_type = _number_types()
    todo = [command]
    while todo:
        cmd = todo.pop()
        todo.extend(getattr(cmd, "commands", {}).values())
        for param in cmd.params:
            if isinstance(param.type, float_type):
                param.type = _checked(param, integer=False)
            elif isinstance(param.type, int_type):
                param.type = _checked(param, integer=True)
