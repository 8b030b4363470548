"""Filter, then compare: what the hallucination filter bought and what it cost."""

from __future__ import annotations

import json

from capaudit.cli.main import main


def test_hallucination_filter_then_compare_on_demo(tmp_path, capsys):
    db = str(tmp_path / "demo.duckdb")
    assert main(["demo", "--db", db, "--report", str(tmp_path / "demo_rep")]) == 0
    # evidence defaults to the stored CHAIR ground truth, like audit run
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--evidence", "chair-gt",
                 "--out", "nic_nohal", "--db", db]) == 0
    rep = tmp_path / "rep"
    assert main(["audit", "compare", "nic", "nic_nohal", "--report", str(rep), "--n-boot", "100",
                 "--db", db]) == 0
    sets = json.loads((rep / "metrics.json").read_text())["sets"]
    assert sets["nic"]["chair_s"]["value"] > 20
    # the filtered set is scored on nic's images: a dropped caption counts as an empty one,
    # so it hallucinates nothing and mentions nothing
    assert sets["nic_nohal"]["chair_s"]["value"] == 0.0
    md = (rep / "report.md").read_text()
    assert "## What filtering cost" in md
    line = next(l for l in md.splitlines() if l.startswith("- nic_nohal vs parent nic"))
    before, after = [float(x) for x in line.split(": recall ")[1].split(";")[0].split(" -> ")]
    assert before == round(sets["nic"]["recall"]["value"], 2)
    assert after == round(sets["nic_nohal"]["recall"]["value"], 2)
    assert after < before  # dropped captions cost recall, though surviving ones score higher
