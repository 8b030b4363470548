"""Human review round trip: flag -> export -> edit -> import, refusing stale rows."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pytest

from capaudit.errors import InputError
from capaudit.filters.review import export_review, import_review, read_review_file
from capaudit.filters.runner import log_counts, read_log, run_filter

CAPTIONS = [
    (1, "a dog sitting on a couch."),                      # supported
    (2, "a cat on a bed. a man holds a surfboard."),       # 2nd sentence unsupported
    (3, "a pizza on a table."),                            # unsupported (no pizza)
    (4, "two giraffes near a tree."),                      # supported
]
EVIDENCE = {1: ["dog", "couch"], 2: ["cat", "bed", "person"], 3: ["dining table"], 4: ["giraffe"]}


@pytest.fixture
def flagged(store, tmp_path):
    tbl = pa.table({"image_key": [str(i) for i, _ in CAPTIONS],
                    "image_id": pa.array([i for i, _ in CAPTIONS], pa.int64()),
                    "caption": [c for _, c in CAPTIONS],
                    "meta": [None] * len(CAPTIONS)})
    store.add_set_from_table("base", tbl, source="test", format="test")
    gt = tmp_path / "gt.jsonl"
    gt.write_text("".join(json.dumps({"image_id": i, "objects": o}) + "\n"
                          for i, o in EVIDENCE.items()))
    run_filter(store, "base", "hallucination", {"chair_gt": str(gt), "action": "flag"}, "flagged")
    return store


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_export_edit_import(flagged, tmp_path, suffix):
    store = flagged
    path = tmp_path / f"review.{suffix}"
    assert export_review(store, "flagged", path) == 2  # rows 1 and 2 were flagged
    recs = {r["row_idx"]: r for _, r in read_review_file(path)}
    assert set(recs) == {1, 2} and "unsupported: surfboard" in recs[1]["reasons"]
    recs[1]["decision"], recs[1]["edited_caption"] = "edit", "a cat on a bed. a man holds a cat."
    recs[2]["decision"] = "drop"
    _write(path, list(recs.values()))
    info, summary, refused = import_review(store, "flagged", path, "reviewed")
    assert refused == []
    caps = store.captions("reviewed").column("caption").to_pylist()
    assert caps == ["a dog sitting on a couch.", "a cat on a bed. a man holds a cat.",
                    "two giraffes near a tree."]
    assert info.parent == "flagged"
    counts = log_counts(store, "reviewed")
    assert counts["ok"] and counts["sentences_in"] == 5 and counts["dropped"] == 1
    log = read_log(store, "reviewed").to_pylist()
    rev = [r for r in log if r["action"] == "revise"]
    assert len(rev) == 1 and rev[0]["original"] == "a man holds a surfboard." \
        and rev[0]["revised"] == "a man holds a cat."


def test_refuses_rows_changed_since_export(flagged, tmp_path):
    store = flagged
    path = tmp_path / "review.csv"
    export_review(store, "flagged", path)
    recs = [r for _, r in read_review_file(path)]
    for r in recs:
        r["decision"], r["edited_caption"] = "edit", "an edited caption."
    _write(path, recs)
    sid = store.get_set("flagged").set_id
    store.con.execute("UPDATE captions SET caption = 'changed meanwhile.' "
                      "WHERE set_id = ? AND row_idx = 2", [sid])
    with pytest.raises(InputError, match="changed since export"):
        import_review(store, "flagged", path, "strict_out", strict=True)
    assert store.find_set("strict_out") is None  # nothing partial
    _info, summary, refused = import_review(store, "flagged", path, "lenient_out")
    assert [(r, why) for _, r, why in refused] == [(2, "source caption changed since export")]
    caps = store.captions("lenient_out").column("caption").to_pylist()
    assert caps[1] == "an edited caption." and caps[2] == "changed meanwhile."
    assert summary.extra["refused"][0]["row_idx"] == 2


def test_cli_review(flagged, tmp_path, capsys):
    from capaudit.cli.main import main

    db = str(flagged.path)
    flagged.close()
    path = tmp_path / "r.jsonl"
    assert main(["review", "export", "flagged", "--out", str(path), "--db", db]) == 0
    assert main(["review", "import", "flagged", str(path), "--out", "rev", "--db", db]) == 0
    assert "4 out" in capsys.readouterr().out  # untouched file: every caption kept
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"set": "flagged", "row_idx": "x", "source_sha256": "",
                               "edited_caption": ""}) + "\n")
    assert main(["review", "import", "flagged", str(bad), "--out", "rev2", "--db", db]) == 2
    assert "row_idx 'x' is not an integer" in capsys.readouterr().err
    from capaudit.store import Store

    with Store(db) as st:  # reopen for the fixture's close()
        assert st.find_set("rev2") is None


def _write(path, recs):
    if path.suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(recs[0]))
            w.writeheader()
            w.writerows(recs)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
