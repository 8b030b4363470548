"""Entry point: assembles the sub-apps and turns user errors into one line, exit 2.

Each command module exposes ``register(app)``; modules are imported here and
nothing heavy happens at import time (torch, transformers and litert are
imported inside the commands that need them).
"""

from __future__ import annotations

import copy
import errno
import importlib
import signal
import sys

import typer

from capaudit import __version__
from capaudit.cli.help_defaults import fill_defaults as _fill_defaults

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
    "capaudit.cli.filter_validate",  # filter validate (on the filter group)
    "capaudit.cli.downstream",   # train-downstream, caption
    "capaudit.cli.plugins",      # plugins
    "capaudit.cli.store",        # store check
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


# a process that multiprocessing spawns (the evidence reader, a --workers worker) imports
# this module again as ``__mp_main__`` only to run a task: it needs no commands (~0.2 CPU-s)
if __name__ != "__mp_main__":
    _register_all()
    _fill_defaults(app)   # every option's default in --help (capaudit.cli.help_defaults)


def _asked_app(argv: list[str]) -> typer.Typer:
    """The app with only the group and command the command line names (``audit run``), or
    the whole app when it names none exactly (help, a typo: typer lists and suggests from
    all). Why: typer builds a click command for each of the 37 commands and their ~430
    options at every start, ~0.03 s of a 0.8 s warm audit (#24); the app itself is left
    whole for the next call in this process."""
    words = [w for w in argv[:2] if not w.startswith("-")][:2]
    if not words or argv[0].startswith("-"):
        return app
    group = next((g for g in app.registered_groups if g.name == words[0]), None)
    command = next((c for c in app.registered_commands if _name(c) == words[0]), None)
    if group is None and command is None:
        return app
    asked = copy.copy(app)
    asked.registered_commands = [command] if command else []
    asked.registered_groups = [group] if group else []
    if group is not None and len(words) > 1 and argv[1] == words[1]:
        sub = group.typer_instance
        one = next((c for c in sub.registered_commands if _name(c) == words[1]), None)
        if one is not None:
            asked_sub = copy.copy(sub)
            asked_sub.registered_commands, asked_sub.registered_groups = [one], []
            asked_group = copy.copy(group)
            asked_group.typer_instance = asked_sub
            asked.registered_groups = [asked_group]
    return asked


def _name(command) -> str:
    """A registered command's name as typer derives it."""
    return command.name or typer.main.get_command_name(command.callback.__name__)


def _usage_error_types() -> tuple[type, ...]:
    """Usage errors as typer raises them: its vendored click, and click itself."""
    types: list[type] = []
    try:
        from typer._click.exceptions import ClickException as TyperClickException
        types.append(TyperClickException)
    except ImportError:  # pragma: no cover - older typer uses click directly
        pass
    import click

    types.append(click.ClickException)
    return tuple(types)


_TERMINATED_BY: list[int] = []  # the SIGTERM/SIGHUP that ended the command, if one did


def _interrupted() -> int:
    from capaudit.cli.common import interrupt_note

    note = interrupt_note() or "nothing stored"
    if _TERMINATED_BY:
        signum = _TERMINATED_BY[0]
        sys.stderr.write(f"capaudit: terminated by {signal.Signals(signum).name}, {note}\n")
        return 128 + signum
    sys.stderr.write(f"capaudit: interrupted, {note}\n")
    return 130


def _terminate_as_interrupt(signum, frame) -> None:
    """SIGTERM and SIGHUP (a service stop, a closed terminal) take Ctrl-C's path: workers
    and open connections are stopped, transactions roll back, what is done is kept. By
    default they killed the process on the spot and left its worker processes running.
    Raised once: the same stop sent again (``timeout`` signals the command and then its
    process group, as systemd and Kubernetes signal every process of the unit) arrived while
    the first was being handled and ended the command in a traceback."""
    if _TERMINATED_BY:   # already on its way out, one line said or about to be
        return
    _TERMINATED_BY.append(signum)
    raise KeyboardInterrupt


def _handle_termination() -> None:
    """For a command-line process only (``run``), never for ``main()`` called in-process."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate_as_interrupt)
    _watch_signals()


def _watch_signals() -> None:
    """Python runs a signal handler only between bytecodes of the main thread: while that
    thread is inside one long DuckDB statement (the INSERT of ``sets add``) Ctrl-C waited
    for seconds. The interpreter also writes each signal to a wake-up pipe at once; a
    thread reading it asks the open stores' DuckDB to stop its query."""
    import os
    import threading

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    stops = {int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGHUP)}

    def watch() -> None:
        while True:
            got = os.read(read_fd, 64)
            stores = sys.modules.get("capaudit.store.open_stores")  # never imported from here
            if stores is not None and stops.intersection(got):
                stores.interrupt_open_stores()

    threading.Thread(target=watch, name="capaudit-signals", daemon=True).start()


_OUTPUT_ERRNOS = (errno.ENOSPC, errno.EPIPE, errno.EIO)


def _end_start_up() -> None:
    """From here Ctrl-C takes main()'s path (what is done is kept and said)."""
    from capaudit.cli import interrupted_while_starting

    if signal.getsignal(signal.SIGINT) is interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _printable_streams() -> None:
    """Whatever the terminal's encoding (``PYTHONIOENCODING=ascii``, a C locale), every
    message prints: a character it cannot show is written as an escape (``\\xe9``). A
    set name ``café`` ended ``sets add`` in a UnicodeEncodeError traceback, after the set
    was stored."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if encoding not in ("utf8", "utf16", "utf32") and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a detached or closed stream: leave it
                pass


def main(argv: list[str] | None = None) -> int:
    """Run the CLI: user errors print one line on stderr and exit 2, usage errors the usual
    usage message and exit 2, Ctrl-C one line and exit 130; never a traceback for those."""
    import duckdb

    from capaudit.cli.common import keep_on_interrupt
    from capaudit.cli.numbers import guard_numbers
    from capaudit.core.config import set_command
    from capaudit.core.names import check_path_text
    from capaudit.errors import CapauditError, shown

    args = list(argv if argv is not None else sys.argv[1:])
    _printable_streams()
    set_command(args)
    keep_on_interrupt(None)  # what an earlier command in this process kept is not ours
    try:
        _end_start_up()
        for arg in args:
            check_path_text(arg)  # the store keeps the command line and paths as text
        command = typer.main.get_command(_asked_app(args))
        guard_numbers(command)   # every int/float option: one parser, finite, in range
        code = command.main(args=args, standalone_mode=False, prog_name="capaudit")
    except CapauditError as exc:   # credentials masked here too: the last line of defence
        from capaudit.core.redact import redact

        sys.stderr.write(f"capaudit: error: {shown(redact(str(exc)), one_line=True)}\n")
        return exc.exit_code
    except (KeyboardInterrupt, duckdb.InterruptException):
        return _interrupted()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except _usage_error_types() as exc:
        exc.show()
        return exc.exit_code if isinstance(exc.exit_code, int) and exc.exit_code else 2
    except (typer.Abort, typer.Exit) as exc:
        return getattr(exc, "exit_code", 1)
    except (duckdb.IOException, duckdb.SerializationException,
            duckdb.OutOfMemoryException) as exc:
        first = shown(str(exc).strip().splitlines()[0][:300], one_line=True)
        fix = ("the store's unfinished transaction was rolled back; free memory and rerun, or "
               "clean a corpus this large with filter run --shards"   # nothing of it stays
               if isinstance(exc, duckdb.OutOfMemoryException) else  # else a store cut short:
               "the store or a file it reads is truncated or damaged; restore it from a copy "
               "or rebuild it, and check free disk space")   # it fails past its last page
        sys.stderr.write(f"capaudit: error: {first} (fix: {fix})\n")
        return 2
    except OSError as exc:  # the terminal's own output failed (stdout on /dev/full, a pipe)
        if exc.errno not in _OUTPUT_ERRNOS or exc.filename is not None:
            raise
        sys.stderr.write(f"capaudit: error: cannot write the output: {exc.strerror} (fix: "
                         "send the output to a disk with free space or a running reader)\n")
        return 2
    except RecursionError:  # a safety net: the readers name the file where they can
        sys.stderr.write("capaudit: error: input nested too deeply to read (a JSON or YAML "
                         "structure thousands of levels deep)\n")
        return 2
    except RuntimeError as exc:  # DuckDB stops a running query on SIGINT with this
        if str(exc).strip() == "Query interrupted":
            return _interrupted()
        raise
    # typer turns a KeyboardInterrupt inside a command into Exit(130) and, with
    # standalone_mode=False, returns that code instead of raising it.
    if code == 130:
        return _interrupted()
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


def _tune_gc() -> None:
    """For a command-line process only (not for ``main()`` called in-process): the objects
    made at start-up (modules, typer's models) live until exit, so they are moved out of
    the collector's reach, and the young generation is collected every 20,000 allocations
    instead of 700. Cyclic collection then costs ~0.03 s of a 40k-caption ``audit run``
    instead of ~0.07 s; reference counting frees everything as before."""
    import gc

    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


def run() -> None:  # pragma: no cover
    from capaudit.core.lean_import import enable

    enable()  # a process of our own: NLTK and spaCy without scipy/sklearn/pandas/torch
    _tune_gc()
    _handle_termination()
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
