"""The leaderboard says what its numbers rest on (#21): a metric with no value for a set
drops out of the N-avg with a note (never a 0.5 standing in for it); gaps are signed with
their direction named and their n; the terminal prints the values, on real captioner
output for COCO val2014."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capaudit.cli.main import main

CATS = ("chair_objects_trainval2014.jsonl", "instance_categories_val2014.jsonl",
        "demographics_val2014.jsonl")


def _sets(shared, tmp_path):
    """400 nic captions of gender-labelled images, and 400 oscar captions of val2014 images
    with no demographic label (their ids are COCO's, so the coverage guard lets them through:
    instances and CHAIR ground truth cover them): gender-word recall is computed for none of
    the second set's captions."""
    rows = [json.loads(line) for _, line in
            zip(range(400), shared("data", "captioners", "nic_val2014_gender.jsonl").open())]
    nic = tmp_path / "nic.jsonl"
    nic.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labelled = {json.loads(line)["image_id"] for line in
                shared("data", "coco2014", CATS[2]).open()}
    other = []
    for line in shared("data", "captioners", "oscar_val2014_all.jsonl").open():
        if len(other) == 400:
            break
        if json.loads(line)["image_id"] not in labelled:
            other.append(line if line.endswith("\n") else line + "\n")
    none = tmp_path / "unlabelled.jsonl"
    none.write_text("".join(other))
    return nic, none


def _board(shared, tmp_path, sets, metrics, name, capsys):
    coco = shared("data", "coco2014")
    out = tmp_path / f"{name}.json"
    capsys.readouterr()
    code = main(["audit", "leaderboard", *map(str, sets), "--metrics", metrics,
                 "--chair-gt", str(coco / CATS[0]), "--instances", str(coco / CATS[1]),
                 "--demographics", str(coco / CATS[2]), "--profile", "overall",
                 "--n-boot", "30", "--json", str(out), "--markdown", str(tmp_path / f"{name}.md"),
                 "--db", str(tmp_path / f"{name}.duckdb")])
    text = capsys.readouterr().out
    assert code == 0, text
    return json.loads(out.read_text())["leaderboard"], text


def test_a_metric_with_no_value_drops_out_of_the_n_avg(shared, tmp_path, capsys):
    sets = _sets(shared, tmp_path)
    lb, out = _board(shared, tmp_path, sets, "chair_s,recall,gender_word_recall", "with", capsys)
    col = next(c for c in lb["columns"] if c["name"] == "gap:gender_word_recall:gender")
    j = lb["columns"].index(col)
    assert lb["values"][1][j] is None and lb["values"][0][j] is not None
    assert col["averaged"] is False
    note = ("dropped from the average: gap:gender_word_recall:gender (no value for "
            "unlabelled: computed for no caption)")
    assert note in lb["notes"] and note in " ".join(out.split())
    # no value is shown as "–" in the terminal and the Markdown, never "+nan"
    md = (tmp_path / "with.md").read_text()
    row = next(r for r in md.splitlines() if r.startswith("| gender_word_recall (male − female)"))
    assert row.endswith(" | – |") and "nan" not in md.lower() and "nan" not in out.lower()
    # the N-avg is the board's without that column (not one with 0.5 for it)
    base, _ = _board(shared, tmp_path, sets, "chair_s,recall", "without", capsys)
    assert lb["profiles"]["overall"]["score"] == pytest.approx(base["profiles"]["overall"]["score"])


def test_gaps_signed_direction_named_with_n_in_every_view(shared, tmp_path, capsys):
    nic, _ = _sets(shared, tmp_path)
    oscar = tmp_path / "oscar.jsonl"
    oscar.write_text("".join(line for _, line in zip(range(400), shared(
        "data", "captioners", "oscar_val2014_gender.jsonl").open())))
    lb, out = _board(shared, tmp_path, [nic, oscar], "recall,chair_s", "gaps", capsys)
    j = next(j for j, c in enumerate(lb["columns"]) if c["name"] == "gap:recall:gender")
    assert lb["columns"][j]["gap"] == "male − female"
    info = lb["groups"]["nic"]["gap:recall:gender"]
    signed = info["signed_gap"]
    assert signed == pytest.approx(info["male"] - info["female"])
    n = min(info["n_male"], info["n_female"])
    assert lb["n"][0][j] == n
    text = f"{signed:+.2f}".replace("-", "−")
    md = (tmp_path / "gaps.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| recall (male − female) |"))
    assert row.split(" | ")[1].startswith(text) and f"n={n:,}" in row.split(" | ")[1]
    # the terminal prints the values table, the gap signed, with n
    flat = " ".join(out.split())
    assert "leaderboard values" in flat and "recall (male − female)" in flat
    assert text in flat and f"n={n:,}" in flat
    # values carry the images they rest on
    k = next(j for j, c in enumerate(lb["columns"]) if c["name"] == "recall")
    assert lb["n"][0][k] == 400 and f"n=400" in md
