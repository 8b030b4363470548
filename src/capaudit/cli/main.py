"""Entry point: assembles the sub-apps and turns user errors into one line, exit 2.

Each command module exposes ``register(app)``; modules are imported here and
nothing heavy happens at import time (torch, transformers and litert are
imported inside the commands that need them).
"""

from __future__ import annotations

import importlib
import sys

import typer

from capaudit import __version__

app = typer.Typer(name="capaudit", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False,
                  help="Audit image-caption datasets for gender bias and object hallucination.")

COMMAND_MODULES = [
    "capaudit.cli.sets",         # sets add/list/show/remove/export
    "capaudit.cli.annotations",  # annotations add/list
    "capaudit.cli.query",        # query, demo
    "capaudit.cli.audit",        # audit run/compare/words/lic/amplification
    "capaudit.cli.judge",        # audit factuality/dcscore/capability/faithscore/capscore, judge
    "capaudit.cli.enrich",       # shards build, enrich, detect
    "capaudit.cli.filters",      # filter run/log, review export/import
    "capaudit.cli.downstream",   # train-downstream, caption
]


def _version(value: bool):
    if value:
        typer.echo(f"capaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    """capaudit: numbers you can trust about caption datasets."""


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command group is not built yet
                continue
            raise
        module.register(app)


_register_all()


def _usage_errors() -> tuple[type, ...]:
    """click's usage-error class, and typer's vendored copy (typer >= 0.2x raises that one)."""
    found = []
    for name in ("click.exceptions", "typer._click.exceptions"):
        try:
            found.append(importlib.import_module(name).ClickException)
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line on stderr and exit 2."""
    from capaudit.core.config import set_command
    from capaudit.errors import CapauditError

    set_command(argv if argv is not None else sys.argv[1:])
    try:
        app(args=argv, standalone_mode=False)
    except CapauditError as exc:
        sys.stderr.write(f"capaudit: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("capaudit: interrupted; nothing partial was stored\n")
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except Exception as exc:  # click usage errors
        if isinstance(exc, typer.Exit):
            return exc.exit_code
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help is printed already
            return 2
        if isinstance(exc, _usage_errors()):
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "capaudit"
            msg = " ".join(exc.format_message().split())
            sys.stderr.write(f"capaudit: error: {msg} (fix: see '{where} --help')\n")
            return 2
        if isinstance(exc, typer.Abort):
            return 1
        raise
    return 0


def run() -> None:  # pragma: no cover
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
