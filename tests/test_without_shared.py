"""A clone without ``../shared`` (#46): the whole suite collects, and only the tests that need
the data skip, each when it runs, naming what is missing. A module that reads the data, or
skips, at import stops pytest at collection for everyone (it once did: a ``shared_path`` call at
module level), so the collection runs here with ``CAPAUDIT_SHARED`` naming an empty folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow   # one collection of the whole suite: the imports of every test module
def test_every_test_module_collects_without_the_shared_data(tmp_path):
    empty = tmp_path / "no-shared"
    empty.mkdir()
    env = {**os.environ, "CAPAUDIT_SHARED": str(empty)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-ra",
                           "-p", "no:cacheprovider"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert not re.search(r"\berrors?\b", out.splitlines()[-1]), out[-4000:]
    # each module gives tests, or skips as a whole for a missing package (never for the data)
    listed = {line.split("::")[0].rsplit("/", 1)[-1] for line in out.splitlines()
              if "::" in line and not line.startswith("SKIPPED")}
    skipped = {}
    for line in out.splitlines():
        hit = re.match(r"SKIPPED \[\d+\] (?:\S*/)?(test_\w+\.py)(?::\d+)?: (.*)", line)
        if hit:
            skipped[hit[1]] = hit[2]
    modules = {p.name for p in (REPO / "tests").glob("test_*.py")
               if re.search(r"^\s*(?:async )?def test_", p.read_text("utf-8"), re.M)}
    assert modules - listed - set(skipped) == set(), out[-2000:]
    for name, reason in skipped.items():
        assert str(empty) not in reason and "shared" not in reason, (name, reason)
