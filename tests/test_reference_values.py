"""One reading of a record's reference value, the set run's (``--reference-col`` over the
set's source) and the shard run's (each record's field): malformed values give no texts on
both paths, and the two runs log alike (issue #42's review: the paths had drifted; a
number in the column was a traceback in the set run, a mapping's keys were read as texts)."""

from __future__ import annotations

import json

import pytest

from capaudit.filters.reference_sources import reference_texts

CAPTION = "A dog under a tree."
#: (reference value, the sentence's reason): a value whose texts name the dog and the tree
#: supports both; any other value gives the image no references (the CHAIR ground truth
#: supports the dog, the tree is undecided)
NAMED = "supported: dog->dog [references: named], tree->tree [references: named]"
UNDECIDED = "supported: dog->dog; undecided: tree->tree"
CASES = [(["a dog lying under a tree", "  "], NAMED), (5, UNDECIDED),
         ([["a dog under a tree"]], UNDECIDED), ([], UNDECIDED),
         ({"a dog under a tree": 1}, UNDECIDED), (True, UNDECIDED), ("", UNDECIDED),
         (None, UNDECIDED), ([3, "a tree by a dog"], NAMED)]


@pytest.mark.parametrize("value, texts", [
    ("a dog", ["a dog"]), (["a dog", "", " ", 7, None, ["x"]], ["a dog"]), (5, []),
    (0, []), (True, []), ({"a dog": 1}, []), ([["a dog"]], []), ([], []), ("  ", []),
    (None, []), (2.5, [])])
def test_reference_texts(value, texts):
    assert reference_texts(value) == texts


def test_malformed_values_read_alike_in_a_set_and_over_shards(tmp_path):
    """Image i+1 carries CASES[i]'s value: the tree is supported where the value holds a
    text naming it, undecided (no references for the image: the CHAIR ground truth judges
    the dog alone) everywhere else, in the set run and the shard run alike."""
    import capaudit
    from shard_fixtures import run_cli

    from capaudit.filters.logs import read_shard_log, sharded_run
    from capaudit.store import Store

    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / "a.jsonl"
    src.write_text("".join(json.dumps({"image_id": i + 1, "caption": CAPTION, "refs": v})
                           + "\n" for i, (v, _) in enumerate(CASES)))
    gt = tmp_path / "gt.jsonl"
    gt.write_text("".join(json.dumps({"image_id": i + 1, "objects": ["dog"]}) + "\n"
                          for i in range(len(CASES))))
    want = {i + 1: reason for i, (_, reason) in enumerate(CASES)}
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("a", src)
    store.filter("a", "hallucination", "a_f", chair_gt=str(gt), reference_col="refs")
    got = dict(store.query("SELECT image_id, reason FROM filter_log WHERE set_name = 'a_f'")
               .rows)
    assert got == want
    assert run_cli("filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / "out",
                   "--filter", "hallucination", "--chair-gt", gt, "--reference-col", "refs",
                   "--db", tmp_path / "s2.duckdb") == 0
    with Store(tmp_path / "s2.duckdb", read_only=True) as st:
        info = sharded_run(st, str(tmp_path / "out"))
    assert {r["image_id"]: r["reason"] for r in read_shard_log(info, None).to_pylist()} == want
