"""The wheel works without the repository: built, installed with its own dependencies (the
tested versions in constraints.txt, nothing borrowed from this environment) in a fresh
virtual environment elsewhere, it carries its prompts, lexicons, demo data and detector
model, and runs ``capaudit --version``, ``capaudit demo`` and the README's API snippet."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the venv's own capaudit, and only its own packages (no site-packages borrowed)
WHERE = """
import capaudit, pathlib, sys
venv = pathlib.Path(r'{venv}').resolve()
assert pathlib.Path(capaudit.__file__).resolve().is_relative_to(venv), capaudit.__file__
assert sys.prefix != sys.base_prefix
for entry in sys.path:
    assert 'site-packages' not in entry or pathlib.Path(entry).resolve().is_relative_to(venv), entry
"""


def _run(cmd, cwd, env, timeout=600):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _source_copy(dest: Path) -> Path:
    """What the build reads (pyproject, README, the package) copied to ``dest``: a build writes
    ``build/`` and ``*.egg-info`` beside its sources, and the suite writes nothing into the
    checkout."""
    import shutil

    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns(
        "*.egg-info", "__pycache__", "*.pyc"))
    return dest


def test_the_build_copy_holds_what_the_build_reads(tmp_path):
    src = _source_copy(tmp_path / "source")
    assert (src / "pyproject.toml").read_bytes() == (ROOT / "pyproject.toml").read_bytes()
    assert (src / "src" / "capaudit" / "data" / "demo" / "nic.jsonl").is_file()
    assert not list(src.rglob("*.egg-info")) and not list(src.rglob("__pycache__"))


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repo(tmp_path):
    pytest.importorskip("build", reason="pip install -e '.[dev]'")
    dist = tmp_path / "dist"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CAPAUDIT_DB")}
    source = _source_copy(tmp_path / "source")
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist",
          "--outdir", str(dist), str(source)], source, env)
    wheel = next(dist.glob("capaudit-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("capaudit/data/prompts/judge_factuality.txt",
                   "capaudit/data/profiles.yaml", "capaudit/data/page/page.html",
                   "capaudit/data/judge.yaml",
                   "capaudit/data/lexicons/chair_synonyms.txt",
                   "capaudit/data/demo/nic.jsonl", "capaudit/data/demo/chair_gt.jsonl",
                   "capaudit/data/models/ssd_mobilenet_v2_coco/"
                   "mobilenet_ssd_v2_coco_quant_postprocess.tflite"):
        assert needed in names, needed
    import tarfile

    sdist = tarfile.open(next(dist.glob("capaudit-*.tar.gz"))).getnames()
    assert any(n.endswith("data/models/ssd_mobilenet_v2_coco/coco_labels.txt") for n in sdist)

    venv = tmp_path / "venv"
    # a plain venv: the wheel's dependencies come from the index, at the tested versions; the
    # nlp extra for the README snippet's hallucination filter (spaCy), no torch
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"),
          f"{wheel}[nlp]"], tmp_path, env)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env["MPLBACKEND"] = "Agg"
    _run([str(py), "-c", WHERE.format(venv=venv)], work, env)
    version = _run([str(venv / "bin" / "capaudit"), "--version"], work, env)
    import capaudit

    assert version.strip() == f"capaudit {capaudit.__version__}"
    out = _run([str(venv / "bin" / "capaudit"), "demo"], work, env)
    assert (work / "capaudit-demo.duckdb").exists()
    assert (work / "capaudit-demo-report" / "report.md").exists(), out
    # the README's Python API snippet, as written (res.to_pandas() included)
    from test_readme import readme_block

    _run([str(py), "-c", readme_block("## Python API", "python")], work, env)
    assert (work / "report" / "report.md").exists()
    out = _run([str(py), "-c", "import capaudit; s = capaudit.open('audit.duckdb'); "
                "print(*[(x.name, x.n_captions, x.n_images) for x in s.sets()])"], work, env)
    # nic's 1,000 captions of 1,000 images, and the filtered nic_clean beside it
    assert out.startswith("('nic', 1000, 1000) ('nic_clean', "), out
