"""Default prompt templates ship inside the package (an installed wheel has them)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import capaudit
from capaudit.enrich.adapters.base import ADAPTERS, PACKAGED_PROMPTS, load_prompt
from capaudit.filters import critique

ROOT = Path(__file__).resolve().parents[1]


def _package_data_globs() -> list[str]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return cfg["tool"]["setuptools"]["package-data"]["capaudit"]


def test_every_prompt_in_use_is_packaged_and_covered_by_package_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./configs/prompts here: only packaged files can answer
    pkg = Path(capaudit.__file__).parent
    names = {p for name in ADAPTERS.names() for p in ADAPTERS.get(name).prompts}
    names |= {"critique_revise"}
    names |= {p.stem for p in (ROOT / "configs" / "prompts").glob("judge_*.txt")}
    assert {"judge_factuality", "judge_units", "judge_capscore"} <= names
    assert {"sharegpt4v", "fusecap", "capsfusion"} <= names
    globs = _package_data_globs()
    for name in sorted(names):
        path = PACKAGED_PROMPTS / f"{name}.txt"
        assert path.is_file(), path
        rel = path.relative_to(pkg).as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), (rel, globs)
        if name.startswith("critique_"):  # the reviser's (the judge's is judge_factuality)
            assert critique.load_prompt(name.split("_", 1)[1]) == path.read_text(encoding="utf-8")
        else:
            assert load_prompt(name) == path.read_text(encoding="utf-8")


def test_the_packaged_prompts_are_the_configs_prompts():
    """configs/prompts is the one copy; the package reaches it through a link."""
    assert PACKAGED_PROMPTS.resolve() == (ROOT / "configs" / "prompts").resolve()
    assert sorted(p.name for p in PACKAGED_PROMPTS.iterdir()) == \
        sorted(p.name for p in (ROOT / "configs" / "prompts").iterdir())


def test_a_local_configs_prompts_file_replaces_the_packaged_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs" / "prompts").mkdir(parents=True)
    (tmp_path / "configs" / "prompts" / "fusecap.txt").write_text("mine {caption}")
    (tmp_path / "configs" / "prompts" / "critique_judge.txt").write_text("judge {sentence}")
    assert load_prompt("fusecap") == "mine {caption}"
    assert critique.load_prompt("judge") == "judge {sentence}"
    assert critique.load_prompt("revise") == (PACKAGED_PROMPTS / "critique_revise.txt").read_text()
