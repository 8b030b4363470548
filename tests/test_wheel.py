"""The wheel works without the repository: built, installed in a fresh virtual environment
elsewhere, it carries its prompts, lexicons, demo data and detector model, and runs
``capaudit demo`` and the API quickstart."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

API_QUICKSTART = """
import capaudit, pathlib
assert pathlib.Path(capaudit.__file__).is_relative_to(pathlib.Path(r'{venv}')), capaudit.__file__
store = capaudit.open('quick.duckdb')
store.add_set('nic', capaudit.demo_file('nic.jsonl'))
store.add_annotations('chair-gt', capaudit.demo_file('chair_gt.jsonl'))
res = store.audit('nic', metrics=['chair_s'], n_boot=50)
row = next(iter(res))
print('chair_s', row['value'], row['n'])
"""


def _run(cmd, cwd, env, timeout=600):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repo(tmp_path):
    pytest.importorskip("build", reason="pip install -e '.[dev]'")
    dist = tmp_path / "dist"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CAPAUDIT_DB")}
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist",
          "--outdir", str(dist), str(ROOT)], ROOT, env)
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
    # the dependencies come from this environment (no network, no reinstall)
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp_path, env)
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed",
          str(wheel)], tmp_path, env)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env["MPLBACKEND"] = "Agg"
    version = _run([str(venv / "bin" / "capaudit"), "--version"], work, env)
    import capaudit

    assert version.strip() == f"capaudit {capaudit.__version__}"
    out = _run([str(venv / "bin" / "capaudit"), "demo"], work, env)
    assert (work / "capaudit-demo.duckdb").exists()
    assert (work / "capaudit-demo-report" / "report.md").exists(), out
    out = _run([str(py), "-c", API_QUICKSTART.format(venv=venv)], work, env)
    assert out.startswith("chair_s ") and out.split()[2] == "1000"
