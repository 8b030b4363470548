"""What a user must be told about the hallucination filter's evidence before trusting it:
the categories it never names (issue 23), and a coverage too low to judge the set."""

from __future__ import annotations

import json
from itertools import islice

from capaudit.cli.main import main


def _nic(shared, tmp_path, n=120):
    """The first ``n`` captions of the NIC captioner on val2014, as published."""
    src = tmp_path / "nic.jsonl"
    with open(shared("data", "captioners", "nic_val2014_gender.jsonl"), encoding="utf-8") as fh:
        src.write_text("".join(islice(fh, n)))
    return src


def test_instances_category_coverage_is_reported_and_repeated_by_the_filter(shared, tmp_path,
                                                                           capsys):
    """The shared val2014 instances hold 79 of the 80 COCO categories (no tennis racket,
    DATA.md): `annotations add` says so, and `filter run` / `filter log` repeat it beside
    the evidence line, where a tennis-racket sentence is then dropped as unsupported."""
    db = str(tmp_path / "t.duckdb")
    inst = shared("data", "coco2014", "instance_categories_val2014.jsonl")
    assert main(["annotations", "add", "instances", str(inst), "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "40,504 images; 79 of 80 COCO categories; missing: tennis racket" in out
    # two of COCO's own captions of val2014 image 153822 (captions_val2014_subset.json),
    # whose instances are person and sports ball: the racket has no category to match
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"image_id": 153822, "caption": c}) + "\n" for c in (
        "A woman is hitting a ball with a tennis racket.",
        "A woman swinging a tennis racket at a tennis ball.")))
    assert main(["sets", "add", "t", str(src), "--db", db]) == 0
    assert main(["filter", "run", "t", "--filter", "hallucination", "--evidence", "instances",
                 "--out", "t2", "--db", db]) == 0
    assert main(["filter", "log", "t2", "--limit", "5", "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    line = "evidence categories: 79 of 80 COCO categories; missing: tennis racket"
    assert out.count(line) == 2          # once by filter run, once by filter log
    assert "captions 2 in, 0 out" in out
    from capaudit.filters.runner import read_log
    from capaudit.store import Store

    with Store(db) as st:
        reasons = read_log(st, "t2").column("reason").to_pylist()
    assert reasons == ["unsupported: racket->tennis racket"] * 2


def test_filter_stops_when_its_evidence_covers_too_little(shared, tmp_path, capsys):
    """NIC's val2014 captions registered as nocaps images: the coco2014 instances cover none
    of them. The filter used to finish and call its CHAIR "~0 by construction"; it now
    stops with the audit's one line, and --allow-partial runs it (all kept, unjudged)."""
    db = str(tmp_path / "t.duckdb")
    inst = shared("data", "coco2014", "instance_categories_val2014.jsonl")
    assert main(["annotations", "add", "instances", str(inst), "--db", db]) == 0
    assert main(["sets", "add", "nic", str(_nic(shared, tmp_path)), "--namespace", "nocaps",
                 "--db", db]) == 0
    capsys.readouterr()
    args = ["filter", "run", "nic", "--filter", "hallucination", "--evidence", "instances",
            "--out", "nic2", "--db", db]
    assert main(args) == 2
    err = " ".join(capsys.readouterr().err.split())
    # the audit's words for a set of another dataset (issue 46: not "register a namespace")
    assert ("'nic': the instances annotations are for coco2014, another dataset than this "
            "set's nocaps, so it covers none of its 120 images") in err
    assert "--allow-partial keeps the uncovered captions unjudged" in err
    assert "Traceback" not in err
    assert main(args + ["--allow-partial"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "captions 120 in, 120 out" in out and "covers 0 of 120 images" in out
