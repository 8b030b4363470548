"""What a new user ran, following the README on a fresh store, that broke: each test here
reproduces one such failure (found by hand at COLUMNS=80 on the shared files) and checks the fix.
"""

from __future__ import annotations

import pytest
from rich.console import Console

from capaudit.cli.main import main


@pytest.fixture
def narrow(monkeypatch):
    """The CLI's console at 80 columns, as in a default terminal."""
    from capaudit.cli import audit_metrics, common

    monkeypatch.setenv("COLUMNS", "80")
    for module in (common, audit_metrics):
        monkeypatch.setattr(module, "console", Console(width=80))


def test_audit_metrics_readable_in_80_columns(narrow, capsys):
    # was: the description and direction columns collapsed to nothing and names were cut
    # ("factuality.response_corre", "descriptiv", "no (-")
    from capaudit.cli.audit_metrics import metric_rows

    assert main(["audit", "metrics"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    flat = " ".join(" ".join(line.strip("│ ").split()) for line in lines)
    for r in metric_rows():
        assert r["name"] in flat, r["name"]
        assert r["criterion"] in flat
        # the description's first words are shown (it may wrap)
        assert " ".join(r["description"].split()[:3]) in flat, r["description"]
