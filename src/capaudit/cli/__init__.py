"""The typer CLI: a thin layer over plain functions (see :mod:`capaudit.cli.main`).

Ctrl-C while the command-line process is still importing (the first half second) printed
a 30-line ``KeyboardInterrupt`` traceback: nothing has been done then, so until
:func:`capaudit.cli.main.main` takes over it is one line and exit 130. Only for the
``capaudit`` command and ``python -m capaudit.cli.main``, never for an importing program,
and never where SIGINT is ignored: the local executor's workers start so (their parent alone
answers Ctrl-C), and ``spawn`` gives them the parent's ``sys.argv``, so a worker that took
this handler printed a second, contradicting "interrupted, nothing stored" line.

The same process starts OpenBLAS with one thread unless ``OPENBLAS_NUM_THREADS`` is set:
its threads, started when numpy is imported, cost ~0.08 s of CPU per command (start-up and
exit, a third of a 40k-caption CHAIR audit's start, #24) and capaudit's only numpy matrix
products (the bootstrap's) are skinny and run single-threaded anyway. And pyarrow allocates
from the system allocator unless ``ARROW_DEFAULT_MEMORY_POOL`` is set: its default mimalloc
pool kept the pages of every streamed chunk, ~30 MB more peak memory at 810k captions than
at 40k (#24; jemalloc and system measured alike, and system exists in every build).
"""

import os
import signal
import sys


def interrupted_while_starting(signum, frame) -> None:
    os.write(2, b"capaudit: interrupted, nothing stored\n")
    os._exit(130)


if sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "") == "capaudit":
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:   # a pool worker (spawned with
        signal.signal(signal.SIGINT, interrupted_while_starting)  # the parent's argv) ignores it
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
