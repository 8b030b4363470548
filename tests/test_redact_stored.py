"""Secrets never reach what capaudit stores or writes beside an output (#25): the command
line and the resolved config go into the run rows and every ``provenance.json``, and a
judge URL given as ``http://user:password@host`` or a bearer token typed on the command
line must arrive there masked."""

from __future__ import annotations

import json

from capaudit.core import config
from capaudit.store import Store

SECRET_URL = "http://alice:s3cretpw@judge.example/v1"


def test_command_line_and_provenance_are_redacted(tmp_path):
    config.set_command(["audit", "capscore", "nic", "--judge-url", SECRET_URL,
                        "--header", "Authorization: Bearer sk-abcdef123456"])
    try:
        line = config.current_command()
        written = config.write_provenance(tmp_path / "p.json", {"judge": {"url": SECRET_URL}})
    finally:
        config.set_command(None)
    text = line + written.read_text(encoding="utf-8")
    assert "s3cretpw" not in text and "sk-abcdef123456" not in text
    assert "judge.example/v1" in text and "capscore nic" in line  # the rest is kept


def test_run_rows_store_no_secret(tmp_path):
    with Store(tmp_path / "r.duckdb") as store:
        run_id = store.start_run(f"capaudit audit capscore --judge-url {SECRET_URL}",
                                 {"judge": {"url": SECRET_URL}, "n_boot": 10}, 0, {})
        command, cfg = store.one("SELECT command, config FROM runs WHERE run_id = ?", [run_id])
    assert "s3cretpw" not in command + cfg
    assert json.loads(cfg)["n_boot"] == 10 and "judge.example" in json.loads(cfg)["judge"]["url"]
