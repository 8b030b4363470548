"""Print every option of every ``capaudit`` command with the commands that take it, its
default as ``--help`` shows it and its help text: the raw material of ``docs/cli.md``.

    PYTHONPATH=src python tools/cli_options.py [--markdown]

``tests/test_cli_vocabulary.py`` holds docs/cli.md to listing every option this prints.
"""

from __future__ import annotations

import sys
from collections import defaultdict


def click_options():
    """``(command path, click option)`` of every visible option of every command."""
    import typer

    from capaudit.cli.main import app

    def walk(c, path):
        if hasattr(c, "commands"):
            for n, sub in c.commands.items():
                yield from walk(sub, path + [n])
        else:
            yield " ".join(path), c

    for path, c in walk(typer.main.get_command(app), []):
        for p in c.params:
            if getattr(p, "param_type_name", "") == "option" and not p.hidden \
                    and p.opts[0] != "--help":
                yield path, p


def options() -> dict[str, list[tuple[str, str, str]]]:
    """``{"--option": [(command, default shown, help)]}`` of the whole CLI."""
    out: dict[str, list] = defaultdict(list)
    for path, p in click_options():
        shown = p.show_default if isinstance(p.show_default, str) else (
            "" if p.default is None or p.is_flag and p.default is False else str(p.default))
        for o in p.opts + p.secondary_opts:
            if o.startswith("--"):
                out[o].append((path, shown, " ".join((p.help or "").split())))
    return dict(sorted(out.items()))


def main() -> None:
    for opt, uses in options().items():
        if "--markdown" in sys.argv:
            print(f"| `{opt}` | {', '.join(sorted({u[0] for u in uses}))} | {uses[0][2]} |")
        else:
            for path, shown, text in uses:
                print(f"{opt}\t{path}\t{shown}\t{text}")


if __name__ == "__main__":
    main()
