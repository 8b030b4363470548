"""The LLM backends live in ``capaudit.llm``; the old ``capaudit.enrich.backends`` paths are the
same module objects (one registration per backend, patching one patches the other)."""

import importlib

import pytest


@pytest.mark.parametrize("name", ["base", "cache", "chat", "openai", "transformers_backend"])
def test_old_path_is_the_new_module(name):
    old = importlib.import_module(f"capaudit.enrich.backends.{name}")
    new = importlib.import_module(f"capaudit.llm.{name}")
    assert old is new and new.__name__ == f"capaudit.llm.{name}"


def test_one_registry_and_lazy_targets():
    from capaudit.enrich.backends import BACKENDS as old
    from capaudit.llm import BACKENDS as new

    assert old is new
    assert set(new.names()) >= {"echo", "openai", "transformers", "transformers-captioner"}
    assert new.get("openai").__module__ == "capaudit.llm.openai"


def test_patching_the_old_path_reaches_the_new(monkeypatch):
    import capaudit.enrich.backends.openai as old
    import capaudit.llm.openai as new

    monkeypatch.setattr(old, "_capaudit_probe", 1, raising=False)
    assert new._capaudit_probe == 1
