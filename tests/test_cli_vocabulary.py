"""One vocabulary on the command line (#34.9): defaults in every help, every format read in
``--format``'s help, ``--json`` always a file, ``--reference`` always a human caption set,
image ids labelled one way, annotations in provenance.json, ``docs/cli.md`` listing every
option, and ``audit lic``'s estimate from a model of the classifier's cost."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from capaudit.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from cli_options import click_options as _click_options, options  # noqa: E402


def test_every_option_shows_its_default():
    missing = []
    for path, p in _click_options():
        shown = isinstance(p.show_default, str) or (
            p.default is not None and not (p.is_flag and p.default is False))
        if not (p.required or shown or "default" in (p.help or "").lower()):
            missing.append(f"{path} {p.opts[0]}")
    assert missing == []


def test_filter_run_help_shows_each_filters_default(capsys):
    from capaudit.filters.declared import DEFAULTS

    assert main(["filter", "run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    h = DEFAULTS["hallucination"]
    assert f"drop-sentence, drop-caption or flag [default: ({h['action']})]" in text
    assert f"[default: ({h['min_coverage']})]" in text
    tol = DEFAULTS["gender-balance"]["tolerance"]
    assert f"[default: ({tol})]" in text


def test_format_help_lists_every_registered_reader():
    from capaudit.io.readers import READERS

    helps = [u[2] for u in options()["--format"] if u[0] == "sets add"]
    assert len(helps) == 1
    listed = set(re.split(r"[\s,]+", helps[0]))
    assert set(READERS.names()) <= listed


def test_json_always_names_a_file_and_print_json_prints(tmp_path, capsys):
    import capaudit

    for path, p in _click_options():
        if "--json" in p.opts:
            assert not p.is_flag, f"{path}: --json must take a FILE"
    db = tmp_path / "q.duckdb"
    assert main(["sets", "add", "nic", str(capaudit.demo_file("nic.jsonl")), "--db",
                 str(db)]) == 0
    sql = "SELECT name, n_captions FROM caption_sets ORDER BY name"
    capsys.readouterr()
    assert main(["query", sql, "--print-json", "--db", str(db)]) == 0
    printed = capsys.readouterr()
    rows = [json.loads(line) for line in printed.out.splitlines()]
    assert rows and set(rows[0]) == {"name", "n_captions"} and printed.err == ""
    assert main(["query", sql, "--json", "--db", str(db)]) == 0      # the old spelling
    old = capsys.readouterr()
    assert [json.loads(line) for line in old.out.splitlines()] == rows
    assert "query --json is deprecated: use --print-json" in old.err


def test_reference_is_always_a_human_caption_set():
    helps = {u[0]: u[2] for u in options()["--reference"]}
    assert len(helps) >= 6
    assert all(h.startswith("Human caption set of the same images") for h in helps.values())


@pytest.mark.slow
def test_ids_are_labelled_one_way(shared, tmp_path, capsys):
    db = str(tmp_path / "i.duckdb")
    text_keys = shared("data", "real", "capsfusion_example_data.json")
    numbers = shared("data", "captioners", "nic_val2014_gender.jsonl")
    capsys.readouterr()
    assert main(["sets", "add", "caps", str(text_keys), "--db", db]) == 0
    assert main(["sets", "add", "nic", str(numbers), "--db", db]) == 0
    added = " ".join(capsys.readouterr().out.split())
    assert "(capsfusion; ids: none)" in added and "(jsonl; ids: unassigned)" in added
    assert main(["sets", "list", "--db", db]) == 0
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip()
            for line in capsys.readouterr().out.splitlines() if line.count("│") > 5}
    assert rows["caps"] == "none" and rows["nic"] == "unassigned"
    assert main(["sets", "show", "caps", "--db", db]) == 0
    assert "ids none (text or row keys" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_provenance_names_the_stored_annotations(shared, tmp_path):
    db, out = str(tmp_path / "p.duckdb"), tmp_path / "r.json"
    gt = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    nic = shared("data", "captioners", "nic_val2014_gender.jsonl")
    assert main(["annotations", "add", "chair-gt", str(gt), "--db", db]) == 0
    assert main(["audit", "run", str(nic), "--metrics", "chair_s", "--n-boot", "0",
                 "--json", str(out), "--db", db]) == 0
    prov = json.loads((tmp_path / "r.json.provenance.json").read_text())
    rec = prov["config"]["annotations"]["chair_gt"]
    # the store names the file it read by its resolved path (../shared may be a link)
    assert rec["path"] == str(gt.resolve()) and rec["stored_as"] == "chair-gt"
    assert rec["sha256"] == hashlib.sha256(gt.read_bytes()).hexdigest()
    assert rec["n_images"] == sum(1 for line in gt.open() if line.strip())


def test_docs_cli_lists_every_option():
    doc = (ROOT / "docs" / "cli.md").read_text()
    listed = set(re.findall(r"^\| `(--[a-z0-9-]+)` \|", doc, flags=re.M))
    assert set(options()) <= listed
    assert len(listed) == len(re.findall(r"^\| `--", doc, flags=re.M))   # each once


def test_docs_cli_names_every_command_of_each_option():
    """Each row's commands are those that take the option: filter run's --shards options
    (--workers, --where, --format, ...) were missing, so a reader of the table could not
    learn that filter run takes them (and refuses them without --shards)."""
    doc = (ROOT / "docs" / "cli.md").read_text()
    wrong = {}
    for flag, listed in re.findall(r"^\| `(--[a-z0-9-]+)` \| ([^|]*)\|", doc, flags=re.M):
        named = {c.strip() for c in listed.split(",") if c.strip()}
        real = {command for command, *_ in options().get(flag, [])}
        if named != real:
            wrong[flag] = (sorted(real - named), sorted(named - real))
    assert wrong == {}


def test_lic_estimate_recovers_a_known_cost_model():
    """A classifier whose cost is known (1.5 s per classifier, 0.25 s per epoch, 2 ms per
    caption-epoch, plus a 4 s first-call warm-up), on a clock it advances itself: the
    calibration reads those back, and predicts 20 epochs on 1,638 captions exactly."""
    from capaudit.audit.lic.plan import calibrate

    class Clock:
        t = 0.0

        def __call__(self):
            return self.t

    clock = Clock()

    class Fake:
        warm = False

        def fit_score(self, x, y, tx, ty, *, seed, epochs):
            clock.t += (0 if self.warm else 4.0) + 1.5 + epochs * (0.25 + 0.002 * len(x))
            self.warm = True

    images = list(range(2000))
    labels = {i: "male" if i % 2 else "female" for i in images}
    tokens = {i: ["a", "person"] for i in images}
    cal = calibrate(Fake(), images, labels, ("male", "female"), tokens, 0, 0.1, clock=clock)
    assert cal.per_caption == pytest.approx(0.002) and cal.per_epoch == pytest.approx(0.25)
    assert cal.fixed == pytest.approx(1.5)
    assert cal.seconds(1, 20) == pytest.approx(1.5 + 20 * (0.25 + 0.002 * cal.n_train))
