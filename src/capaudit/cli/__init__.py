"""The typer CLI: a thin layer over plain functions (see :mod:`capaudit.cli.main`).

Ctrl-C while the command-line process is still importing (the first half second) printed
a 30-line ``KeyboardInterrupt`` traceback: nothing has been done then, so until
:func:`capaudit.cli.main.main` takes over it is one line and exit 130. Only for the
``capaudit`` command and ``python -m capaudit.cli.main``, never for an importing program.
"""

import os
import signal
import sys


def interrupted_while_starting(signum, frame) -> None:
    os.write(2, b"capaudit: interrupted, nothing stored\n")
    os._exit(130)


if sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "") == "capaudit":
    signal.signal(signal.SIGINT, interrupted_while_starting)
