"""The README's commands are what runs: its Python API snippet works as written (after the
plain install, which is why pandas is a core dependency), and its test command is the line
``.ci/run`` runs, inside a fresh virtual environment, with the tested versions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

# after the snippet, as written: what it built, for the assertions below
CHECKS = """
import json as _json
_df = res.to_pandas()
_log = store.query("SELECT * FROM filter_log LIMIT 5").to_pandas()
print("CHECKS " + _json.dumps({
    "type": type(_df).__module__.split(".")[0],
    "rows": _df[["set", "metric", "value", "n"]].to_dict("records"),
    "log_type": type(_log).__module__.split(".")[0], "log_rows": len(_log),
    "sets": sorted(s.name for s in store.sets()),
}))
"""


def readme_block(heading: str, lang: str) -> str:
    """The first fenced ``lang`` block after ``heading`` in README.md."""
    section = README.split(heading, 1)[1]
    match = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert match, f"no ```{lang} block after {heading!r} in README.md"
    return match.group(1)


def test_readme_python_api_snippet_runs_as_written(tmp_path):
    snippet = readme_block("## Python API", "python")
    assert "res.to_pandas()" in snippet
    env = {k: v for k, v in os.environ.items() if k != "CAPAUDIT_DB"}
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run([sys.executable, "-c", snippet + CHECKS], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.split("CHECKS ", 1)[1])
    assert got["type"] == "pandas" and got["log_type"] == "pandas"
    # the bundled demo: CHAIR_s over the 1,000 nic captions, CHAIR_i over their object
    # mentions; each is a percentage of a whole number of captions / mentions
    rows = {r["metric"]: r for r in got["rows"] if r["set"] == "nic"}
    assert sorted(rows) == ["chair_i", "chair_s"] and len(got["rows"]) == 2, got["rows"]
    assert rows["chair_s"]["n"] == 1000 and rows["chair_i"]["n"] > 1000, rows
    for row in rows.values():
        hallucinated = row["value"] * row["n"] / 100
        assert 0 < row["value"] < 100 and abs(hallucinated - round(hallucinated)) < 1e-6, row
    assert 0 < got["log_rows"] <= 5
    assert got["sets"] == ["nic", "nic_clean"]
    assert (tmp_path / "audit.duckdb").exists()
    assert (tmp_path / "report" / "report.md").exists()


def test_readme_test_command_is_what_ci_runs_in_a_fresh_venv():
    commands = readme_block("On a fresh machine", "bash").splitlines()
    test_command = commands[commands.index(next(c for c in commands if c.startswith("# 2."))) + 1]
    demo_command = commands[commands.index(next(c for c in commands if c.startswith("# 1."))) + 1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci, f"README's test command is not a line of .ci/run: {test_command}"
    for command in (test_command, demo_command):
        assert command.count("pip install -c constraints.txt ") == 2, command
    # a fresh environment every run, in a folder git ignores, failing on any error
    assert "set -euo pipefail" in ci
    venv_at = next(i for i, line in enumerate(ci) if " -m venv .venv-ci" in line)
    assert "rm -rf .venv-ci" in ci[:venv_at]
    assert ci.index("source .venv-ci/bin/activate") < ci.index(test_command)
    assert ".venv-ci/" in (ROOT / ".gitignore").read_text().splitlines()


def test_constraints_pin_every_dependency_of_the_tested_extras():
    """Every requirement named in pyproject.toml (core and the extras the suite installs) has
    an exact version in constraints.txt, so an install with it reproduces the tested one."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in ("dev", "nlp", "ml", "detect", "ocr", "hf", "ray", "s3", "http"):
        names += project["optional-dependencies"][extra]
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    for req in names:
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.\-]+", req).group(0)).lower()
        assert name in pins, f"{req} has no pinned version in constraints.txt"
    assert pins["torch"] == "2.13.0" and pins["duckdb"] == "2.0.1"
