"""Where an audit's output goes: a single set's table is its audit (not a "compare"), and
work folders and caches land beside the store or in the user cache dir, never in the
working directory (issue 23)."""

from __future__ import annotations

import json
from capaudit.cli.main import main


def _oscar(shared, n):
    path = shared("data", "captioners", "oscar_val2014_gender.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()[:n]]


def test_single_set_audit_is_titled_as_its_audit(shared, tmp_path, capsys):
    src = tmp_path / "oscar.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _oscar(shared, 80)))
    args = ["audit", "run", str(src), "--metrics", "vocab,length", "--n-boot", "20",
            "--db", str(tmp_path / "a.duckdb")]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "capaudit audit of oscar (95% bootstrap intervals)" in out
    assert "capaudit compare" not in out and "best in green" not in out
