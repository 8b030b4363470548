"""Old home of the LLM/VLM backends, now :mod:`capaudit.llm` (enrichment, filters and judged
metrics all use them). Kept so that ``capaudit.enrich.backends[.base|.cache|.chat|.openai|
.transformers_backend]`` still import: each name is the same module object as its
``capaudit.llm`` counterpart (loaded on first use), so patching either patches both."""

import importlib
import importlib.abc
import importlib.util
import sys

from capaudit.llm import BACKENDS, Backend, GenRequest, GenResult, make_backend

__all__ = ["BACKENDS", "Backend", "GenRequest", "GenResult", "make_backend"]

_MOVED = ("base", "cache", "chat", "openai", "transformers_backend")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``capaudit.enrich.backends.X`` to the module ``capaudit.llm.X``."""

    def find_spec(self, name, path=None, target=None):
        head, _, tail = name.rpartition(".")
        if head == __name__ and tail in _MOVED:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("capaudit.llm." + spec.name.rpartition(".")[2])

    def exec_module(self, module):
        pass  # already executed under its new name


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
