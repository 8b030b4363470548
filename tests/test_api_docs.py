"""The API page in docs/ is generated from the docstrings and builds without warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_api_page_builds_strict(tmp_path):
    pytest.importorskip("mkdocstrings", reason="pip install -e '.[dev]'")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (site / "api" / "index.html").read_text()
    from capaudit.api import AuditStore

    public = [m for m in vars(AuditStore) if not m.startswith("_")]
    assert len(public) >= 9
    for name in [*public, "ResultTable", "to_pandas", "CapauditError"]:
        assert name in page, f"{name} missing from the API page"
    shutil.rmtree(site)
