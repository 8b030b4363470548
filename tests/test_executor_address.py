"""``--address`` names a Ray cluster: with the local executor it was silently ignored (the run
went on on this machine, the user had meant the cluster). Every command that takes it now
refuses it in one line, exit 2, before any work: the inputs below do not exist, so a command
that read anything first would name them instead, and no store or work folder is made.
The YAML's ``address:`` with the CLI's ``--executor local`` is the same conflict."""

from __future__ import annotations

import pytest

from capaudit.cli.main import main
from capaudit.errors import UsageError

NEEDS = "--address needs --executor ray"


def _refused(capsys, tmp_path, args: list) -> str:
    rc = main([str(a) for a in args] + ["--db", str(tmp_path / "s.duckdb")])
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    assert err.count("\n") == 1 and NEEDS in err and "Traceback" not in err, err
    assert {p.name for p in tmp_path.iterdir()} <= {"judge.yaml"}, "nothing made"
    return err


GONE = "/nonexistent/capaudit-input"
COMMANDS = {
    "audit run --shards": ["audit", "run", "--shards", GONE, "--address", "auto"],
    "filter run --shards": ["filter", "run", "--shards", GONE, "--out", GONE + "-out",
                            "--filter", "hallucination", "--address", "auto"],
    "enrich": ["enrich", "sharegpt4v", "--shards", GONE, "--out", "e", "--llm", "echo",
               "--executor", "local", "--address", "auto"],
    "shards build": ["shards", "build", "--images", GONE, "--captions", "nic", "--out",
                     GONE + "-out", "--address", "auto"],
    "annotations detect": ["annotations", "detect", "--shards", GONE, "--name", "d",
                           "--address", "auto"],
    "audit factuality": ["audit", "factuality", GONE, "--address", "auto"],
    "audit capability": ["audit", "capability", GONE, "--annotations", GONE,
                         "--address", "10.0.0.1:6379", "--executor", "local"],
    "judge validate": ["judge", "validate", "--labels", GONE, "--address", "auto",
                       "--dry-run"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_address_with_the_local_executor_is_one_line_before_any_work(command, tmp_path,
                                                                         capsys):
    _refused(capsys, tmp_path, COMMANDS[command])


def test_an_unknown_executor_is_still_named_first(tmp_path, capsys):
    rc = main(["audit", "run", "--shards", GONE, "--executor", "nope", "--address", "auto",
               "--db", str(tmp_path / "s.duckdb")])
    err = capsys.readouterr().err
    assert rc == 2 and "nope" in err and NEEDS not in err, err


@pytest.mark.parametrize("yaml, flags", [("address: auto\n", []),
                                         ("address: auto\nexecutor: ray\n",
                                          ["--executor", "local"]),
                                         ("executor: local\n", ["--address", "auto"])])
def test_the_yaml_and_the_cli_resolve_before_the_check(yaml, flags, tmp_path, capsys):
    """CLI > YAML > defaults: the address and the executor that run are the resolved ones."""
    (tmp_path / "judge.yaml").write_text(yaml)
    _refused(capsys, tmp_path, ["audit", "factuality", GONE, "--config",
                                tmp_path / "judge.yaml", *flags])


def test_the_yaml_executor_ray_takes_the_cli_address(tmp_path, capsys):
    """``executor: ray`` in the YAML and ``--address`` on the command line agree: the check
    lets it through (the missing caption file is what is named next)."""
    (tmp_path / "judge.yaml").write_text("executor: ray\n")
    rc = main(["audit", "factuality", GONE, "--config", str(tmp_path / "judge.yaml"),
               "--address", "auto", "--db", str(tmp_path / "s.duckdb")])
    err = capsys.readouterr().err
    assert rc == 2 and NEEDS not in err and GONE in err, err


def test_every_run_of_the_runner_holds_the_rule():
    """The API reaches the runner without the CLI: ``RunOptions`` holds the same rule."""
    from capaudit.runner.step import RunOptions

    with pytest.raises(UsageError, match=NEEDS):
        RunOptions("local", 2, "auto")
    assert RunOptions("ray", 2, "auto").address == "auto"
    assert RunOptions("local", 2).address is None


@pytest.mark.parametrize("args, flag", [
    # a run without shards joins no cluster: "add --executor ray" (the --address check's
    # fix) would be refused next, so what is named is that only shards read --address
    (["audit", "run", "nic", "--address", "auto"], "--address"),
    (["filter", "run", "nic", "--out", "clean", "--filter", "hallucination", "--address",
      "auto"], "--address"),
    (["audit", "run", "nic", "--executor", "ray", "--address", "auto"], "--executor"),
    (["audit", "run", "nic", "--skip-bad-shards"], "--skip-bad-shards"),
    (["audit", "run", "nic", "--name", "other"], "--name"),   # the set name of shards only
    (["filter", "run", "nic", "--out", "clean", "--filter", "hallucination", "--executor",
      "ray", "--address", "auto"], "--executor"),
    (["filter", "run", "nic", "--out", "clean", "--filter", "gender-neutral", "--workers",
      "2"], "--workers"),
    (["filter", "run", "nic", "--out", "clean", "--filter", "gender-neutral", "--where",
      "id < 3"], "--where"),
])
def test_a_run_without_shards_refuses_what_only_shards_read(args, flag, tmp_path, capsys):
    """``--executor ray --address`` on a registered set passed the address check and then
    ran in this process, the cluster (or workers, or --where) silently ignored: refused in
    one line, before the store is opened."""
    rc = main([str(a) for a in args] + ["--db", str(tmp_path / "s.duckdb")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert f"{flag} applies to" in err and "--shards" in err, err
    assert NEEDS not in err and "add --executor ray" not in err, err
    assert not any(tmp_path.iterdir()), "nothing made"


def test_a_file_url_names_the_local_file(tmp_path):
    """``file:///PATH`` is how the project says "this path on every node": the annotation
    file given so was 'not found' (``open`` of the URL text)."""
    from capaudit.judge.capability import read_inputs

    (tmp_path / "el.jsonl").write_text('{"image_id": 1, "dimension": "object", '
                                       '"element": "a dog"}\n')
    path = read_inputs({"annotations": str(tmp_path / "el.jsonl")})
    url = read_inputs({"annotations": f"file://{tmp_path / 'el.jsonl'}"})
    assert url == path and path["by_image"][1][0]["element"] == "a dog"
    from capaudit.core.storage.paths import is_file

    assert is_file(f"file://{tmp_path / 'el.jsonl'}") and not is_file(f"file://{tmp_path}")
