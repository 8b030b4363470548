"""The CLI builds only the command the command line names (#24: building all 37 of them
cost every start ~0.03 s), and behaves as with the whole app: help and typos see every
command, a lone top-level command is still a command, the app stays whole in-process."""

import typer

from capaudit.cli import main as cli


def _commands(app: typer.Typer) -> dict:
    group = typer.main.get_command(app)
    return {name: sorted(getattr(cmd, "commands", {}) or []) for name, cmd in group.commands.items()}


def test_only_the_named_group_and_command_are_built():
    assert _commands(cli._asked_app(["audit", "run", "x.jsonl"])) == {"audit": ["run"]}
    assert _commands(cli._asked_app(["sets", "--help"]))["sets"] == _commands(cli.app)["sets"]
    assert set(_commands(cli._asked_app(["query", "SELECT 1"]))) == {"query"}
    whole = _commands(cli.app)
    for argv in (["--help"], ["--version"], ["audti", "run"], []):
        assert _commands(cli._asked_app(argv)) == whole
    assert len(whole) == 15 and len(whole["audit"]) > 10   # the app itself is untouched


def test_commands_run_as_before(tmp_path, capsys):
    db, caps = str(tmp_path / "s.duckdb"), tmp_path / "caps.jsonl"
    caps.write_text('{"image_id": 1, "caption": "a dog"}\n{"image_id": 2, "caption": "a cat"}\n')
    assert cli.main(["sets", "add", "tiny", str(caps), "--db", db]) == 0
    assert cli.main(["query", "--db", db, "SELECT count(*) * 21 AS n FROM captions"]) == 0
    assert "42" in capsys.readouterr().out
    assert cli.main(["sets", "list", "--db", db]) == 0
    assert "tiny" in capsys.readouterr().out
    assert cli.main(["audit", "rnu"]) == 2            # a typo in a group: usage error
    assert "rnu" in capsys.readouterr().err
