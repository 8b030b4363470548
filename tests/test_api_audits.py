"""The API's leaderboard and LIC (#34.10): the numbers the CLI prints, from the same
functions; their docstring examples run; the notebook's extra installs IPython."""

from __future__ import annotations

import doctest
import json
import tomllib
from pathlib import Path

import pytest

import capaudit
from capaudit import api_audits
from capaudit.cli.main import main
from test_api import demo  # noqa: F401  (fixture: the demo store with both sets)


@pytest.mark.slow
def test_leaderboard_equals_the_cli_json(demo, tmp_path):
    md = tmp_path / "api.md"
    lb = demo.leaderboard(["nic", "oscar"], metrics="chair_s,chair_i,nsfw_words",
                          profile="risk-conscious", n_boot=100, seed=2, markdown=md)
    out = tmp_path / "cli.json"
    assert main(["audit", "leaderboard", "nic", "oscar", "--metrics", "chair_s,chair_i,nsfw_words",
                 "--profile", "risk-conscious", "--n-boot", "100", "--seed", "2",
                 "--json", str(out), "--db", str(demo.path)]) == 0
    cli = json.loads(out.read_text())["leaderboard"]
    mine = lb.to_dict()
    assert mine["sets"] == cli["sets"] == ["nic", "oscar"]
    assert mine["values"] == cli["values"] and mine["ci"] == cli["ci"] and mine["n"] == cli["n"]
    assert mine["profiles"] == cli["profiles"]
    assert md.read_text().startswith("| metric | criterion | nic | oscar |")
    assert (tmp_path / "api.md.provenance.json").exists() or any(
        p.name.startswith("api.md") and "provenance" in p.name for p in tmp_path.iterdir())
    runs = demo.query("SELECT count(*) FROM metrics WHERE metric = 'n_avg'").rows[0][0]
    assert runs == 4          # two runs (API, CLI) x two sets


def test_leaderboard_refuses_what_the_cli_refuses(demo):
    from capaudit.errors import InputError

    with pytest.raises(InputError, match="at least two sets"):
        demo.leaderboard(["nic"])
    with pytest.raises(InputError, match="unknown profile"):
        demo.leaderboard(["nic", "oscar"], profile="no-such-profile")
    with pytest.raises(InputError, match="seeds"):
        demo.lic("nic", seeds=0)


@pytest.mark.slow
def test_lic_equals_the_cli_json(demo, tmp_path):
    res = demo.lic("nic", seeds=1, epochs=1, device="cpu", threads=1, cache=False)
    out = tmp_path / "lic.json"
    assert main(["audit", "lic", "nic", "--seeds", "1", "--epochs", "1", "--device", "cpu",
                 "--threads", "1", "--no-cache", "--json", str(out), "--db", str(demo.path)]) == 0
    cli = json.loads(out.read_text())["sets"]["nic"]
    assert res["name"] == "nic" and res["lic_d"] is None and cli["lic_d"] is None
    assert res["n_images"] == cli["n_images"]
    # the labelled demo images with a caption: counted by hand from the demographics file
    labelled = {d["image_id"] for d in map(json.loads, capaudit.demo_file(
        "demographics.jsonl").open()) if d["gender"] in ("male", "female")}
    nic = {json.loads(line)["image_id"] for line in capaudit.demo_file("nic.jsonl").open()}
    assert res["n_images"] == len(labelled & nic)
    assert res["lic_m"]["value"] == pytest.approx(cli["lic_m"]["value"])


@pytest.mark.slow
def test_docstring_examples_run():
    failures, tried = doctest.testmod(api_audits, optionflags=doctest.ELLIPSIS)
    assert tried >= 8 and failures == 0


def test_the_notebook_extra_installs_ipython():
    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    nb = json.loads((root / "docs" / "quickstart.ipynb").read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"       # the notebook runs on IPython
    names = {r.split(">")[0].split("=")[0].split("[")[0].strip().lower() for r in extras["dev"]}
    assert {"ipython", "ipykernel", "nbclient"} <= names
