"""Lean imports (core/lean_import): NLTK and spaCy without scipy/sklearn/pandas/torch give the
same sentences, tokens and parses on real captions, and only where capaudit owns the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from capaudit.core import lean_import
from tests.conftest import REPO, shared_path

ENRICHED = ("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")  # under ../shared

# prints what the filter's text stack makes of the captions, and which stacks got imported
PROBE = textwrap.dedent("""
    import json, sys
    from capaudit.text.nltk_tokenize import nltk_tokenize_sentences
    from capaudit.text.sentences import punkt_spans
    from capaudit.filters.parse import parse_many
    caps = json.load(open(sys.argv[1]))
    toks = [nltk_tokenize_sentences(c) for c in caps]
    spans = [punkt_spans(c) for c in caps]
    docs = parse_many([s for t in toks for s in t])
    parses = [[(w.tag_, w.dep_, w.head.i) for w in d] for d in docs]
    stacks = sorted(m for m in ("scipy", "sklearn", "pandas", "torch") if m in sys.modules)
    unread = sorted(m for m in ("nltk", "nltk.corpus", "spacy.cli", "weasel") if m in sys.modules)
    import nltk, spacy.cli   # later ordinary imports of what the lean path left out still work
    later = [nltk.tokenize.punkt.__name__, nltk.word_tokenize(caps[0], preserve_line=True),
             callable(spacy.cli.info)]
    print(json.dumps({"toks": toks, "spans": spans, "parses": parses, "stacks": stacks,
                      "unread": unread, "later": later}))
""")


def _probe(tmp_path: Path, lean: bool) -> dict:
    caps = []
    # found when a test runs, not at import: without ../shared this test skips, the module collects
    for rec in json.loads(shared_path(*ENRICHED).read_text("utf-8"))[:60]:
        caps.append(next(t["value"] for t in rec["conversations"] if t["from"] == "gpt"))
    path = tmp_path / "caps.json"
    path.write_text(json.dumps(caps))
    env = {k: v for k, v in os.environ.items() if k != lean_import.ENV}
    if lean:
        env[lean_import.ENV] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
    out = subprocess.run([sys.executable, "-c", PROBE, str(path)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def test_lean_gives_the_same_text_analysis_without_the_stacks(tmp_path):
    pytest.importorskip("spacy")
    ordinary, lean = _probe(tmp_path, lean=False), _probe(tmp_path, lean=True)
    assert lean["stacks"] == []
    # NLTK's package __init__ and spaCy's commands are not even imported (core/lean_import's
    # lean_submodules, lean_import_standing_in); the ordinary import has them all
    assert lean["unread"] == [] and ordinary["unread"] == ["nltk", "nltk.corpus", "spacy.cli",
                                                           "weasel"]
    assert lean["later"] == ordinary["later"]
    assert lean["later"][0] == "nltk.tokenize.punkt" and lean["later"][2] is True
    assert "scipy" in ordinary["stacks"]  # NLTK's own import pulls it in: the lean path matters
    assert sum(len(t) for t in lean["toks"]) > 300   # 60 long captions: hundreds of sentences
    for key in ("toks", "spans", "parses"):
        assert lean[key] == ordinary[key], key


def _package(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(body)


@pytest.fixture
def made(tmp_path, monkeypatch):
    """A folder on ``sys.path`` for the packages a test makes, the lean imports enabled; every
    module whose name starts with one of those packages' names is forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(lean_import.ENV, "1")
    yield tmp_path
    names = tuple(p.name for p in tmp_path.iterdir())
    for name in [n for n in sys.modules if n.startswith(names)]:
        del sys.modules[name]


def test_a_package_that_needs_a_refused_stack_is_imported_the_ordinary_way(made):
    pytest.importorskip("pandas")
    _package(made, "capaudit_needs_pandas", "import pandas\nVALUE = pandas.__name__\n")
    mod = lean_import.lean_import("capaudit_needs_pandas")
    assert mod.VALUE == "pandas"


def test_optional_imports_are_refused_only_inside_and_only_when_enabled(made, monkeypatch):
    _package(made, "capaudit_optional_stack",
             "try:\n    import capaudit_refusable\n    HAS = True\nexcept ImportError:\n"
             "    HAS = False\n")
    _package(made, "capaudit_refusable", "")
    monkeypatch.setattr(lean_import, "UNUSED_STACKS", frozenset({"capaudit_refusable"}))
    assert lean_import.lean_import("capaudit_optional_stack").HAS is False
    assert "capaudit_refusable" not in sys.modules
    __import__("capaudit_refusable")      # outside the block it imports as usual
    for name in ("capaudit_optional_stack", "capaudit_refusable"):
        sys.modules.pop(name, None)
    monkeypatch.delenv(lean_import.ENV)
    assert lean_import.lean_import("capaudit_optional_stack").HAS is True


def test_a_missing_package_still_raises(monkeypatch):
    monkeypatch.setenv(lean_import.ENV, "1")
    with pytest.raises(ImportError):
        lean_import.lean_import("capaudit_no_such_package_anywhere")


def test_the_command_line_and_ray_tasks_turn_it_on(monkeypatch):
    code = ("import os, sys\nfrom capaudit.cli import main as m\n"
            "m.main = lambda: print(os.environ.get('CAPAUDIT_LEAN_IMPORTS')) or 0\nm.run()\n")
    env = {k: v for k, v in os.environ.items() if k != lean_import.ENV}
    env["PYTHONPATH"] = str(REPO / "src")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "1")
    import inspect

    from capaudit.executors.ray import _lean

    monkeypatch.delenv(lean_import.ENV, raising=False)

    def task(t):
        return t, lean_import.enabled()

    wrapped = _lean(task)
    assert inspect.isfunction(wrapped) and wrapped.__name__ == "task"   # ray.remote takes it
    assert wrapped(7) == (7, True)


def test_submodules_load_without_their_packages_init_and_leave_no_trace(made):
    _package(made, "capaudit_heavy", "import sys\nsys.modules['capaudit_heavy_ran'] = sys\n"
             "from capaudit_heavy import helper\n")
    (made / "capaudit_heavy" / "helper.py").write_text("VALUE = 3\n")
    (made / "capaudit_heavy" / "sub").mkdir()
    (made / "capaudit_heavy" / "sub" / "__init__.py").write_text("raise RuntimeError\n")
    (made / "capaudit_heavy" / "sub" / "leaf.py").write_text(
        "from capaudit_heavy import helper\nVALUE = helper.VALUE + 1\n")
    names = ("capaudit_heavy", "capaudit_heavy_ran")
    leaf, helper = lean_import.lean_submodules(
        "capaudit_heavy", ("capaudit_heavy.sub.leaf", "capaudit_heavy.helper"))
    assert (leaf.VALUE, helper.VALUE) == (4, 3)
    assert not [n for n in sys.modules if n.startswith(names)]  # no __init__ ran, none kept
    assert __import__("capaudit_heavy").helper.VALUE == 3        # the ordinary import after
    assert "capaudit_heavy_ran" in sys.modules


def test_a_module_that_needs_its_package_init_is_imported_the_ordinary_way(made):
    _package(made, "capaudit_needs_init", "SETTING = 5\n")
    (made / "capaudit_needs_init" / "mod.py").write_text(
        "import capaudit_needs_init as p\nVALUE = p.SETTING\n")
    _package(made, "capaudit_uses_stub", "from capaudit_uses_stub.extra.info import info, more\n")
    _package(made / "capaudit_uses_stub", "extra", "")
    (made / "capaudit_uses_stub" / "extra" / "info.py").write_text(
        "def info():\n    return 'real'\nmore = 1\n")
    (mod,) = lean_import.lean_submodules("capaudit_needs_init", ("capaudit_needs_init.mod",))
    assert mod.VALUE == 5 and "capaudit_needs_init" in sys.modules   # the ordinary import
    # a stand-in without a name the package imports: the ordinary import, no stand-in left
    pkg = lean_import.lean_import_standing_in(
        "capaudit_uses_stub", {"capaudit_uses_stub.extra.info": {"info": lambda: "stub"}})
    assert pkg.info() == "real" and pkg.more == 1
    assert sys.modules["capaudit_uses_stub.extra.info"].info() == "real"
