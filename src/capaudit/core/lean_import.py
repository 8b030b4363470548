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
import importlib.machinery
import importlib.util
import os
import sys
import types
from contextlib import contextmanager

__all__ = ["ENV", "enable", "enabled", "lean", "lean_import", "lean_submodules", "lean_import_standing_in",
           "UNUSED_STACKS"]

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
        _forget(top)   # the half-imported package, redone the ordinary way
        return importlib.import_module(module)


def lean_submodules(package: str, modules: tuple[str, ...]) -> list:
    """``modules`` (dotted names under ``package``) as :func:`lean_import` gives them; in an
    :func:`enabled` process where ``package`` is not imported yet, without running the
    ``__init__`` of ``package`` or of a subpackage on the way.

    Why: ``import nltk.tokenize.punkt`` first runs ``nltk/__init__`` (translate, corpus,
    chunk, parse, ...: ~270 modules, ~0.15 CPU-s per process), then ``nltk/tokenize/__init__``
    (every tokenizer), for the two classes the text stack reads, whose modules import only a
    dozen of NLTK's. The packages are stood in for by empty ones with the same search path
    while the modules load, so each module runs its own code as it would; then every
    ``package`` name is taken out of ``sys.modules`` again, so a later ``import nltk`` (a
    user's, or a path that needs more of NLTK) runs the package the ordinary way. Anything
    unexpected (a module that needs its package's ``__init__``) falls back to
    :func:`lean_import` of each module."""
    if not enabled() or package in sys.modules:
        return [lean_import(m) for m in modules]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return [lean_import(m) for m in modules]
    root = list(spec.submodule_search_locations)
    try:
        with lean():
            _stand_in(package, root)
            for m in modules:
                parts = m.split(".")
                for k in range(2, len(parts)):
                    sub = ".".join(parts[:k])
                    if sub not in sys.modules:
                        _stand_in(sub, [os.path.join(p, *parts[1:k]) for p in root])
            return [importlib.import_module(m) for m in modules]
    except Exception:  # noqa: BLE001 - redone the ordinary way, which raises what is real
        pass
    finally:
        _forget(package)
    return [lean_import(m) for m in modules]


def _stand_in(name: str, path: list[str]) -> None:
    """An empty package ``name`` searched at ``path`` (its ``__init__`` is not run)."""
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__spec__.submodule_search_locations = module.__path__ = list(path)
    sys.modules[name] = module


def lean_import_standing_in(module: str, stand_ins: dict[str, dict]):
    """:func:`lean_import` of ``module``; in an :func:`enabled` process where its package is
    not imported yet, with each module named in ``stand_ins`` stood in for, while the package
    imports, by a module holding only the given attributes, and taken out of ``sys.modules``
    after (a later import of it runs the real one).

    Why: ``spacy/__init__`` imports ``spacy.cli.info`` for ``spacy.info``, and with it the
    whole ``spacy.cli`` package (every spaCy command, weasel, its pydantic schemas: ~420
    modules, ~0.2 CPU-s per process) that loading and running a pipeline never touches. If
    the package fails that way, it is imported again the ordinary way."""
    top = module.partition(".")[0]
    if not enabled() or top in sys.modules:
        return lean_import(module)
    placed = {}
    for name, attrs in stand_ins.items():
        placed[name] = sys.modules[name] = types.ModuleType(name)
        placed[name].__dict__.update(attrs)
    try:
        return lean_import(module)
    except Exception:  # noqa: BLE001 - redone the ordinary way, which raises what is real
        _forget(top)
        placed.clear()
        return lean_import(module)
    finally:
        for name, stand_in in placed.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


def _forget(package: str) -> None:
    """``package`` and its submodules out of ``sys.modules``: the next import loads them
    the ordinary way."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
