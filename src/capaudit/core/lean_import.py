"""Import NLTK and spaCy without the scientific stacks they pull in but capaudit never uses.

Why: ``import nltk`` runs ``nltk/__init__``, which imports scipy, scikit-learn and pandas for
classifiers capaudit does not call (~150 MB and ~2 s per process), and ``import spacy``
imports thinc, which imports torch only to offer PyTorch-wrapped layers that the small English
pipeline does not have (~200 MB, ~1 s). Each filter worker paid ~330 MB of resident memory
for them before reading a caption (issue #31's "import floor"). Both packages import those
stacks inside ``try: ... except ImportError``, so refusing them *while NLTK or spaCy is
imported* gives the same tokenizers and the same parses (``tests/test_lean_import.py``).

Only processes capaudit owns do this: the command line (:func:`enable`, called by
``capaudit.cli.main.run``) and the workers it starts (they inherit ``CAPAUDIT_LEAN_IMPORTS``).
Code that imports capaudit as a library keeps the ordinary imports, so a user's own
``nltk.classify.SklearnClassifier`` or ``spacy-transformers`` in the same interpreter still
work. A stack that is already imported is used as it is; if a future NLTK or spaCy version
needs a refused package, the import is redone the ordinary way.
"""

from __future__ import annotations

import importlib
import importlib.abc
import os
import sys
from contextlib import contextmanager

__all__ = ["ENV", "enable", "enabled", "lean", "lean_import", "UNUSED_STACKS"]

ENV = "CAPAUDIT_LEAN_IMPORTS"
#: the packages NLTK and spaCy import only for features capaudit does not use
UNUSED_STACKS = frozenset({"scipy", "sklearn", "pandas", "matplotlib", "torch"})


def enable() -> None:
    """Make this process and the processes it starts import NLTK and spaCy lean."""
    os.environ[ENV] = "1"


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


class _Refuse(importlib.abc.MetaPathFinder):
    """A finder that makes the first import of a refused top-level package fail."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names:
            raise ImportError(f"{fullname} is not imported by capaudit's lean import",
                              name=fullname)
        return None


@contextmanager
def lean():
    """Within this block, an :func:`enabled` process does not import :data:`UNUSED_STACKS`
    (those already imported stay usable). For a step that imports more after the package
    itself, such as ``spacy.load`` importing the pipeline's package."""
    if not enabled():
        yield
        return
    finder = _Refuse(frozenset(n for n in UNUSED_STACKS if n not in sys.modules))
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def lean_import(module: str):
    """``importlib.import_module(module)``, without :data:`UNUSED_STACKS` when this process is
    :func:`enabled` and ``module``'s package is not imported yet."""
    top = module.partition(".")[0]
    if not enabled() or top in sys.modules:
        return importlib.import_module(module)
    try:
        with lean():
            return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is None or exc.name.partition(".")[0] not in UNUSED_STACKS:
            raise  # not ours: the package itself is missing or broken
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[name]   # the half-imported package, redone the ordinary way
        return importlib.import_module(module)
