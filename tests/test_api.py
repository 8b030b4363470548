"""The Python API (capaudit.api): same numbers as the CLI, same errors, docstring examples run."""

from __future__ import annotations

import doctest
import json

import pytest

import capaudit
from capaudit import api
from capaudit.cli.main import main
from capaudit.errors import CapauditError, InputError


@pytest.fixture()
def demo(tmp_path):
    store = capaudit.open(tmp_path / "a.duckdb")
    store.add_set("nic", capaudit.demo_file("nic.jsonl"))
    store.add_set("oscar", capaudit.demo_file("oscar.jsonl"))
    store.add_annotations("chair-gt", capaudit.demo_file("chair_gt.jsonl"))
    store.add_annotations("demographics", capaudit.demo_file("demographics.jsonl"))
    return store


def test_version_from_one_place(capsys):
    import tomllib
    from pathlib import Path

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"capaudit {capaudit.__version__}"
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"] == "capaudit.__version__"
    changelog = (Path(__file__).parents[1] / "CHANGELOG.md").read_text()
    assert f"## {capaudit.__version__}" in changelog


@pytest.mark.slow
def test_audit_rows_equal_the_cli_json(demo, tmp_path):
    """The API and ``capaudit audit run --json`` give the same values, n and intervals."""
    res = demo.audit(["nic", "oscar"], metrics="chair_s,chair_i,vocab", n_boot=100, seed=3)
    out = tmp_path / "cli.json"
    assert main(["audit", "run", "nic", "oscar", "--metrics", "chair_s,chair_i,vocab",
                 "--n-boot", "100", "--seed", "3", "--json", str(out),
                 "--db", str(demo.path)]) == 0
    cli = json.loads(out.read_text())["sets"]
    assert len(res) == 6 and res.columns == api.RESULT_COLUMNS
    for row in res:
        ref = cli[row["set"]][row["metric"]]
        assert row["group"] == "all"
        assert (row["value"], row["n"], [row["ci_low"], row["ci_high"]]) == \
            (ref["value"], ref["n"], ref["ci"])
    # the stored run holds the same rows
    stored = demo.query(f"SELECT set_name, metric, value FROM metrics WHERE run_id = {res.run_id} "
                        "ORDER BY set_name, metric").rows
    assert stored == sorted((r["set"], r["metric"], r["value"]) for r in res)
    df = res.to_pandas()
    assert list(df.columns) == list(api.RESULT_COLUMNS) and len(df) == 6
    assert res.to_arrow().column("n").to_pylist() == [r["n"] for r in res]
    assert json.loads(res.to_json())[0]["set"] == "nic"


@pytest.mark.slow
def test_disparity_and_compare_rows(demo):
    d = demo.disparity("nic", metrics=["length"], n_boot=50)
    rows = {r["group"]: r for r in d}
    male, female, gap = rows["gender=male"], rows["gender=female"], rows["gender:male-female"]
    assert gap["value"] == pytest.approx(male["value"] - female["value"])
    assert male["n"] + female["n"] <= 1000
    cmp = demo.compare(["nic", "oscar"], metrics=["chair_s"], n_boot=50, disparity="gender")
    t = api.comparison_table(cmp)
    groups = {(r["set"], r["group"]) for r in t}
    assert ("nic", "all") in groups and ("oscar", "gender:male-female") in groups
    # CHAIR_s: lower is better; marked best (where the intervals separate) is the lower value
    vals = {r["set"]: r["value"] for r in t if r["group"] == "all" and r["metric"] == "chair_s"}
    assert "chair_s" in cmp.best or "chair_s" in cmp.unmarked
    assert cmp.best.get("chair_s", min(vals, key=vals.get)) == min(vals, key=vals.get)


@pytest.mark.slow
def test_filter_then_compare_before_after(demo):
    info, summary = demo.filter("nic", "hallucination", "nic_clean", action="drop-sentence")
    assert info.parent == "nic"
    res = demo.audit(["nic", "nic_clean"], metrics=["chair_s"], n_boot=50)
    before, after = (r["value"] for r in res)
    assert after < before           # dropping hallucinated sentences lowers CHAIR_s
    logged = demo.query("SELECT count(*) FROM filter_log WHERE set_name = 'nic_clean' "
                        "AND action = 'drop'").rows[0][0]
    assert logged > 0


def test_errors_are_capaudit_errors(demo, tmp_path):
    with pytest.raises(InputError, match="neither a registered set nor a file"):
        demo.audit("nope")
    with pytest.raises(InputError, match="unknown audit option"):
        demo.audit("nic", n_bot=10)
    with pytest.raises(CapauditError, match="does not use"):
        demo.filter("nic", "hallucination", "x", tolerance=0.1)
    with pytest.raises(InputError, match="no demo file"):
        capaudit.demo_file("missing.json")
    with pytest.raises(InputError, match="database not found"):
        capaudit.open(tmp_path / "none.duckdb").sets()
    assert not (tmp_path / "none.duckdb").exists()


def test_query_is_read_only(demo):
    with pytest.raises(InputError):
        demo.query("DELETE FROM captions")
    assert demo.query("SELECT count(*) FROM captions").rows == [(2000,)]


@pytest.mark.slow
def test_docstring_examples_run():
    failures, tried = doctest.testmod(api, optionflags=doctest.ELLIPSIS)
    assert tried >= 10 and failures == 0


@pytest.mark.slow
def test_export_hf_carries_the_audit_details(demo, tmp_path):
    datasets = pytest.importorskip("datasets")
    plain = datasets.load_from_disk(str(demo.export("nic", "hf", tmp_path / "plain")))
    assert plain.column_names == ["image_key", "image_id", "namespace", "caption"]
    res = demo.audit("nic", metrics=["chair_s", "chair_i"], n_boot=20)
    ds = datasets.load_from_disk(str(demo.export("nic", "hf", tmp_path / "hf")))
    assert {"audit_run_id", "hallucinated", "chair_s", "mentioned"} <= set(ds.column_names)
    assert len(ds) == 1000 and set(ds["audit_run_id"]) == {res.run_id}
    # CHAIR_s is the share of captions with a hallucinated object: the column gives it back
    chair_s = next(iter(res))["value"]
    assert 100 * sum(ds["chair_s"]) / len(ds) == pytest.approx(chair_s)
    stored = demo.query(f"SELECT hallucinated FROM caption_details WHERE run_id = {res.run_id} "
                        "ORDER BY row_idx").rows
    assert [r[0] for r in stored] == list(ds["hallucinated"])
    assert sum(1 for h in ds["hallucinated"] if h) > 0
