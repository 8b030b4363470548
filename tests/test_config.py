"""Config precedence: CLI > YAML > defaults, and provenance saved beside outputs."""

from __future__ import annotations

import json

import pytest

from capaudit.core.config import provenance, resolve, write_provenance
from capaudit.errors import InputError


def test_precedence(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("audit:\n  n_boot: 50\n  seed: 3\n  nested: {a: 1, b: 2}\n")
    defaults = {"n_boot": 1000, "seed": 0, "mode": "reference", "nested": {"a": 0, "c": 9}}
    cfg = resolve(defaults, y, {"seed": 7, "mode": None}, section="audit")
    assert cfg == {"n_boot": 50, "seed": 7, "mode": "reference", "nested": {"a": 1, "b": 2, "c": 9}}


def test_bad_yaml(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("audit: [unclosed\n")
    with pytest.raises(InputError, match="malformed YAML"):
        resolve({}, y)


def test_provenance_records_versions(tmp_path):
    p = write_provenance(tmp_path / "prov.json", {"n_boot": 5}, seed=11, command="capaudit x")
    data = json.loads(p.read_text())
    assert data["seed"] == 11 and data["config"] == {"n_boot": 5}
    assert "duckdb" in data["versions"] and data["command"] == "capaudit x"
    assert provenance({}, 1)["python"]


def test_repo_config_file_is_used_by_cli(tmp_path, capsys):
    from pathlib import Path
    from capaudit.cli.main import main

    repo_cfg = Path(__file__).resolve().parents[1] / "configs" / "audit.yaml"
    f = tmp_path / "c.jsonl"
    f.write_text('{"image_id": 1, "caption": "a dog on a bed"}\n')
    y = tmp_path / "my.yaml"
    y.write_text(repo_cfg.read_text().replace("n_boot: 1000", "n_boot: 7"))
    db = tmp_path / "d.duckdb"
    assert main(["audit", "run", str(f), "--metrics", "vocab,length", "--config", str(y),
                 "--seed", "5", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["query", "SELECT config FROM runs", "--json", "--db", str(db)]) == 0
    cfg = json.loads(json.loads(capsys.readouterr().out)["config"])
    assert cfg["n_boot"] == 7 and cfg["seed"] == 5 and cfg["mode"] == "reference"


def test_shipped_yaml_configs_only_use_known_keys():
    """A key the code does not read would be silently ignored: the shipped files use none."""
    from pathlib import Path

    from capaudit.audit.runner import DEFAULTS as AUDIT
    from capaudit.core.config import load_yaml
    from capaudit.enrich.runner import DEFAULTS as ENRICH

    root = Path(__file__).resolve().parents[1] / "configs"
    assert set(load_yaml(root / "audit.yaml")["audit"]) <= set(AUDIT)
    enrich = load_yaml(root / "enrich.yaml")
    enrich = enrich.get("enrich", enrich)
    assert set(enrich) <= set(ENRICH), set(enrich) - set(ENRICH)
