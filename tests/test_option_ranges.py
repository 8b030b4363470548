"""Every numeric option is range-checked when it is parsed (issue #25): seed 0..2**32-1,
n-boot 0..100,000, coverage 0..1, workers >= 1, limit >= 1, from the command line, a YAML
config, the Python API and the environment alike. A value out of range is a usage error
(CLI) or one line (YAML, API, environment), exit 2, before any work or allocation."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import time

import pytest
from test_hostile import _env, cli
from test_hostile import one_line_error as one_line

from capaudit.audit.config import AuditConfig
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.errors import InputError


@pytest.fixture
def caps(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps({"image_id": i, "caption": f"a dog on a bed {i}"}) + "\n"
                         for i in range(1, 41)))
    return f


BAD_AUDIT = [("--seed", "-1"), ("--seed", str(2**64 + 1)), ("--seed", str(2**32)),
             ("--n-boot", "-5"), ("--n-boot", "99999999999999999999"), ("--n-boot", "100001"),
             ("--min-coverage", "2"), ("--min-coverage", "-0.1"), ("--workers", "0"),
             ("--workers", "-3")]


@pytest.mark.parametrize("flag,value", BAD_AUDIT)
def test_audit_run_refuses_out_of_range_numbers_at_parse_time(tmp_path, caps, capsys, flag,
                                                              value):
    db = tmp_path / "a.duckdb"
    code, _, err = cli(["audit", "run", caps, flag, value, "--db", db], capsys)
    assert code == 2 and f"Invalid value for '{flag}'" in err and "Traceback" not in err, err
    assert not db.exists()  # refused before anything was created


@pytest.mark.parametrize("flag,value", [("--seed", str(2**32 - 1)), ("--n-boot", "0"),
                                        ("--min-coverage", "1")])
def test_the_range_ends_are_accepted(tmp_path, caps, capsys, flag, value):
    boot = [] if flag == "--n-boot" else ["--n-boot", "20"]
    code, _, err = cli(["audit", "run", caps, flag, value, *boot, "--db", tmp_path / "a.duckdb"],
                       capsys)
    assert code == 0, err


def test_huge_n_boot_is_refused_before_any_allocation(tmp_path, caps):
    """In a real process under a 2 GB address-space cap (it once grew to 18.6 GB)."""
    limit = ("import resource, subprocess, sys; "
             "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
             "sys.exit(subprocess.run(sys.argv[1:]).returncode)")
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", limit, sys.executable, "-m", "capaudit.cli.main",
                          "audit", "run", str(caps), "--n-boot", "99999999999999999999",
                          "--db", str(tmp_path / "a.duckdb")], env=_env(), capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 2 and "Invalid value for '--n-boot'" in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr and time.monotonic() - t0 < 60


@pytest.mark.parametrize("values,says", [
    ({"n_boot": -5}, "n_boot (--n-boot)"), ({"n_boot": 10**20}, "n_boot (--n-boot)"),
    ({"n_boot": True}, "n_boot"), ({"n_boot": 1000.5}, "n_boot"),
    ({"seed": -1}, "seed (--seed)"), ({"seed": 2**64 + 1}, "seed"),
    ({"min_coverage": 2}, "min_coverage (--min-coverage)"),
    ({"min_coverage": float("nan")}, "min_coverage"), ({"workers": 0}, "workers (--workers)"),
    ({"lic_seeds": 11}, "lic_seeds"), ({"chunk_size": 0}, "chunk_size")])
def test_the_api_checks_the_same_ranges(values, says):
    with pytest.raises(InputError, match=r"must be a (whole )?number") as info:
        AuditConfig.of(values)
    assert str(info.value).startswith(says)
    assert AuditConfig.of({"n_boot": 0, "seed": 2**32 - 1, "min_coverage": 1,
                           "chunk_size": None}).seed == 2**32 - 1


def test_a_yaml_config_out_of_range_is_one_line(tmp_path, caps, capsys):
    yaml = tmp_path / "audit.yaml"
    yaml.write_text("audit:\n  n_boot: -5\n")
    code, _, err = cli(["audit", "run", caps, "--config", yaml, "--db", tmp_path / "a.duckdb"],
                       capsys)
    assert code == 2 and "n_boot (--n-boot) must be a whole number from 0 to 100,000" in \
        one_line(err)


@pytest.mark.parametrize("limit", ["-1", "0"])
def test_judge_limit_below_one_is_refused_before_any_call(tmp_path, caps, capsys, limit,
                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer() as srv:
        code, _, err = cli(["audit", "capscore", caps, "--reference", caps, "--limit", limit,
                            "--judge-url", srv.base_url, "--db", tmp_path / "j.duckdb"], capsys)
    assert code == 2 and "Invalid value for '--limit'" in err and srv.calls == 0, err


@pytest.mark.parametrize("key,value", [("limit", -1), ("limit", 0), ("n_boot", -5),
                                       ("seed", -1)])
def test_judge_yaml_values_are_checked(tmp_path, caps, capsys, key, value, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yaml = tmp_path / "judge.yaml"
    yaml.write_text(f"{key}: {value}\n")
    with FakeOpenAIServer() as srv:
        code, _, err = cli(["audit", "capscore", caps, "--reference", caps, "--config", yaml,
                            "--judge-url", srv.base_url, "--db", tmp_path / "j.duckdb"], capsys)
    assert code == 2 and f"{key} (--{key.replace('_', '-')}) must be" in one_line(err)
    assert srv.calls == 0


@pytest.mark.parametrize("kw", [{"limit": -1}, {"limit": 0}, {"workers": 0}])
def test_enrich_api_refuses_out_of_range_values(tmp_path, kw):
    from capaudit.enrich.runner import run_enrich

    with pytest.raises(InputError, match="must be a whole number"):
        run_enrich(tmp_path / "shards", tmp_path / "w", "fusecap", {"captions": "first"}, **kw)


@pytest.mark.parametrize("opts", [{"concurrency": 0}, {"max_retries": -1}])
def test_backend_options_out_of_range(opts):
    from capaudit.llm import make_backend

    with pytest.raises(InputError, match=next(iter(opts))):
        make_backend("openai", {"model": "m", **opts})


@pytest.mark.parametrize("value", ["inf", "nan", "1e400", "-inf", "-1", "0", "lots"])
def test_tar_limit_environment_values_are_one_line(tmp_path, capsys, monkeypatch, value):
    tar = tmp_path / "t.tar"
    with tarfile.open(tar, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(2):
            info = tarfile.TarInfo(f"{i}.txt")
            info.size = 5
            tf.addfile(info, io.BytesIO(b"a dog"))
    monkeypatch.setenv("CAPAUDIT_TAR_TEXT_LIMIT_MB", value)
    code, _, err = cli(["sets", "add", "t", tar, "--db", tmp_path / "t.duckdb"], capsys)
    assert code == 2 and "CAPAUDIT_TAR_TEXT_LIMIT_MB" in one_line(err)
