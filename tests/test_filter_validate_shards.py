"""``filter validate LABELS --set DST`` of a ``filter run --shards ... --out DST`` run (#42): read
from the run's shard logs, it reports exactly what the same captions filtered as a set report,
on the dev labels (FaithScore's 180 records, caption level) and on sentence-level spans laid
on the same real answers."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import shared_path

from capaudit.cli.main import main

pytest.importorskip("spacy")
SAME = ("counts", "precision", "recall", "f1", "n", "n_precision", "n_recall", "n_images", "ci",
        "by_reason", "by_evidence")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The 180 records filtered twice with --action flag: as one set, and as three JSONL
    shards of 60 records (in order) through filter run --shards."""
    labels = shared_path("data", "human_labels", "faithscore_annotation.jsonl")
    gt = shared_path("data", "coco2014", "chair_objects_trainval2014.jsonl")
    tmp = tmp_path_factory.mktemp("vshards")
    recs = [json.dumps({"image_id": int(r["id"]), "caption": r["answer"]}) + "\n"
            for r in map(json.loads, labels.read_text().splitlines())]
    (tmp / "fs.jsonl").write_text("".join(recs))
    (tmp / "shards").mkdir()
    for i in range(3):
        (tmp / "shards" / f"part-{i}.jsonl").write_text("".join(recs[60 * i:60 * i + 60]))
    db = str(tmp / "v.duckdb")
    common = ["--filter", "hallucination", "--action", "flag", "--chair-gt", str(gt),
              "--db", db]
    assert main(["sets", "add", "fs", str(tmp / "fs.jsonl"), "--db", db]) == 0
    assert main(["filter", "run", "fs", "--out", "fsf", *common]) == 0
    assert main(["filter", "run", "--shards", str(tmp / "shards"), "--out",
                 str(tmp / "clean"), *common]) == 0
    return {"db": db, "labels": labels, "tmp": tmp, "dst": str(tmp / "clean")}


def _validate(runs, labels, target, out, *extra) -> dict:
    assert main(["filter", "validate", str(labels), "--set", target, "--json", str(out),
                 "--n-boot", "200", "--db", runs["db"], *extra]) == 0
    return json.loads(out.read_text())


def test_a_shard_run_validates_as_the_set_run_of_the_same_captions(runs, tmp_path):
    as_set = _validate(runs, runs["labels"], "fsf", tmp_path / "set.json")
    as_shards = _validate(runs, runs["labels"], runs["dst"], tmp_path / "shards.json",
                          "--disagreements", str(tmp_path / "d.jsonl"))
    cap = as_shards["caption"]
    assert cap["counts"] == {"tp": 34, "fp": 10, "fn": 44, "tn": 83}   # the README's baseline
    assert {k: cap[k] for k in SAME} == {k: as_set["caption"][k] for k in SAME}
    assert as_shards["matching"] == as_set["matching"] and as_shards["status"] == "ok"
    assert as_shards["set"] == runs["dst"] and as_shards["parent"] == str(runs["tmp"] / "shards")
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 54


def test_sentence_spans_agree_between_the_shard_and_the_set_run(runs, tmp_path):
    """Spans over the real answers (every "There is"/"person"/"table" sentence's first word,
    a rule that knows nothing of the filter): the sentence level must agree too."""
    recs, seen = [], set()
    for r in map(json.loads, runs["labels"].read_text().splitlines()):
        key = (int(r["id"]), r["answer"])
        if key in seen:
            continue
        seen.add(key)
        text, spans, at = r["answer"], [], 0
        for part in text.split(". "):
            start = text.index(part, at)
            at = start + len(part)
            if any(w in part.lower() for w in ("person", "table", "there is")):
                spans.append([start, start + 1])
        recs.append({"image_id": key[0], "caption": text, "spans": spans})
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    as_set = _validate(runs, path, "fsf", tmp_path / "a.json")
    as_shards = _validate(runs, path, runs["dst"], tmp_path / "b.json")
    assert as_set["sentence"]["n"] > 500 and as_set["sentence"]["counts"]["tp"] > 0
    for level in ("sentence", "caption"):
        assert {k: as_shards[level][k] for k in SAME} == {k: as_set[level][k] for k in SAME}


def test_a_relative_spelling_finds_the_run_and_lost_logs_are_one_line(runs, tmp_path,
                                                                       monkeypatch, capsys):
    monkeypatch.chdir(runs["tmp"])
    res = _validate(runs, runs["labels"], "clean", tmp_path / "r.json")
    assert res["set"] == runs["dst"] and res["caption"]["n"] == 171
    logs = runs["tmp"] / "clean.log"
    moved = runs["tmp"] / "moved.log"
    shutil.move(logs, moved)
    try:
        capsys.readouterr()
        assert main(["filter", "validate", str(runs["labels"]), "--set", runs["dst"],
                     "--db", runs["db"]]) == 2
        err = capsys.readouterr().err
        assert "has no shard logs left" in err and "Traceback" not in err
    finally:
        shutil.move(moved, logs)


def test_spans_move_offset_by_offset_between_captions_that_differ_in_white_space():
    from capaudit.filters.validate.align import _moved, offset_map

    src, dst = "  A dog.\n\nA  cat. ", "A dog. A cat."
    # by hand: "A" at 2 -> 0; "A  ca" (10..15) -> "A ca" (7..11); "dog" (4..7) -> 2..5
    assert _moved(src, dst, [(2, 3), (10, 15), (4, 7)]) == [(0, 1), (7, 11), (2, 5)]
    assert offset_map("a b", "  a  b  ") == [2, 3, 5, 6]
    assert offset_map("ab", "a b") is None and offset_map("a b", "ab") is None
    assert offset_map("a cat", "a dog") is None


def test_sets_show_of_the_shard_run_shows_its_validation(runs, tmp_path, capsys):
    """A sharded run has no set, yet ``sets show DST`` shows the run and its validation as it
    shows a set's: the labels, status and n's (caption level: 171 labelled, as validated)."""
    res = _validate(runs, runs["labels"], runs["dst"], tmp_path / "v.json")
    capsys.readouterr()
    assert main(["sets", "show", runs["dst"], "--db", runs["db"]]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "output of filter run --shards" in out and "hallucination" in out
    assert "validated against human labels `faithscore_annotation.jsonl`" in out
    assert f"status {res['status']}" in out and res["status"] == "ok"
    n = res["caption"]["n"]
    assert n == 171 and f"(n {n:,})" in out
    assert f"{res['matching']['matched']:,} of {res['matching']['labelled_captions']:,}" in out
