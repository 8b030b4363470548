"""Reference texts as hallucination evidence (issue #42): synonyms, hierarchy, MiniLM
similarity, undecided objects beside the CHAIR ground truth, the bad inputs, and an
end-to-end run with ``--reference-col`` on real COCO captions."""

from __future__ import annotations

import json

import pytest

from capaudit.errors import InputError
from capaudit.filters.reference_evidence import Support, WithReferences
from capaudit.filters.reference_sources import references_from_column
from capaudit.text.objects import VISUAL_MODE

OFF = 2.0   # a similarity threshold above 1: no similarity support


def test_named_synonym_and_hierarchy_support():
    ev = WithReferences(None, set(), {1: ["A puppy sleeps on a sofa.", "Some fruit."]},
                        VISUAL_MODE, OFF)
    s = ev[1]
    assert s.get("dog") == 1.0 and s.get("dog").by == "references: named"   # puppy -> dog
    assert s.get("couch") == 1.0                                              # sofa -> couch
    assert s.get("animal") == 1.0 and "hierarchy" in s.get("animal").by      # hypernym
    assert s.get("apple") == 1.0 and "fruit (hierarchy)" in s.get("apple").by  # hyponym
    assert s.get("tree") == 0.0                                               # not named
    assert s.get("tree").by == "references: none of 2 names it"
    assert 2 not in ev and ev.get(2) is None


def test_similarity_threshold():
    pytest.importorskip("sentence_transformers")
    refs = {1: ["A dense forest."]}
    # MiniLM cosine of "tree" and "forest" is 0.75 (the packaged model, computed once)
    assert WithReferences(None, set(), refs, VISUAL_MODE, 0.7)[1].get("tree") == 1.0
    assert WithReferences(None, set(), refs, VISUAL_MODE, 0.8)[1].get("tree") == 0.0


def test_combined_with_chair_gt_undecided_outside_its_vocabulary():
    base = {5: {"dog": 1.0}, 6: {"cat": 1.0}}
    ev = WithReferences(base, {"dog", "cat", "person"}, {6: ["a cat under a tree"]},
                        VISUAL_MODE, OFF)
    s5 = ev[5]                          # no references: the ground truth alone
    assert s5.get("dog") == 1.0
    assert s5.get("person") == 0.0      # a COCO category it lacks: unsupported
    assert s5.get("tree") is None       # outside its vocabulary: undecided
    s6 = ev[6]
    assert s6.get("tree") == 1.0 and s6.get("cat") == 1.0
    assert s6.get("shirt") == 0.0       # references judge every category ...
    assert s6.get("sky") is None        # ... but the backdrop they do not name
    assert set(ev) == {5, 6}


def test_backdrop_is_undecided_unless_named_and_parts_follow_their_whole():
    """References that do not name the sky or a wall say nothing about them (undecided);
    named, they support as any object; a named building supports its windows, not the
    reverse; in a COCO mode the backdrop is judged as before (not in the vocabulary)."""
    ev = WithReferences(None, set(), {1: ["A red bus parked by a building."],
                                      2: ["A white wall under a blue sky."],
                                      3: ["A window of a house."]}, VISUAL_MODE, OFF)
    s1, s2 = ev[1], ev[2]
    assert s1.get("sky") is None and s1.get("wall") is None and s1.get("floor") is None
    assert s1.get("tree") == 0.0                              # not backdrop: unsupported
    # the first named whole (in name order) names the support, the same in every process
    assert s1.get("window") == 1.0 and s1.get("window").by == "references: building (part)"
    assert s1.get("wheel") == 1.0 and s1.get("wheel").by == "references: bus (part)"
    assert s2.get("sky") == 1.0 and s2.get("wall").by == "references: named"
    assert ev[3].get("house") == 1.0 and ev[3].get("building") == 1.0   # named; hierarchy
    only_window = WithReferences(None, set(), {4: ["A window."]}, VISUAL_MODE, OFF)[4]
    assert only_window.get("car") == 0.0                      # a part names no whole
    assert not WithReferences(None, set(), {1: ["a dog"]}, "corrected", OFF).backdrop
    # an evidence that names the wall judges it (an open-vocabulary detector's label)
    assert WithReferences({5: {}}, {"wall"}, {5: ["a dog"]}, VISUAL_MODE, OFF)[5].get(
        "wall") == 0.0


def test_support_get_ignores_the_callers_default():
    s = Support({"a": 1.0}, frozenset({"a", "b"}), 0.0)
    assert s.get("b", 0.5) == 0.0 and s.get("z", 0.0) is None


def test_empty_reference_column_is_one_line(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text('{"image_id": 1, "caption": "a dog", "refs": []}\n'
                    '{"image_id": 2, "caption": "a cat", "refs": ""}\n')
    with pytest.raises(InputError) as exc:
        references_from_column(path, "refs")
    assert "empty in every record" in str(exc.value) and "set.jsonl" in str(exc.value)
    with pytest.raises(InputError, match="is in no record"):
        references_from_column(path, "missing")
    with pytest.raises(InputError, match="is the caption column: each caption would support"):
        references_from_column(path, "caption")   # every caption its own reference


def _coco_set(shared, tmp_path, n_images: int = 40):
    """Oscar captions of val2014 images, each record carrying the image's COCO captions."""
    coco = json.loads(shared("data", "coco2014", "captions_val2014_subset.json").read_text())
    refs: dict[int, list[str]] = {}
    for a in coco["annotations"]:
        refs.setdefault(a["image_id"], []).append(a["caption"])
    rows = []
    for line in shared("data", "captioners", "oscar_val2014_all.jsonl").open():
        rec = json.loads(line)
        if rec["image_id"] in refs:
            rows.append({**rec, "references": refs[rec["image_id"]]})
            if len(rows) == n_images:
                break
    path = tmp_path / "oscar_refs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def test_end_to_end_reference_col_on_real_captions(shared, tmp_path):
    import capaudit
    from capaudit.text.visual_objects import (BACKDROP, named_categories, parts,
                                              related_categories)

    path, rows = _coco_set(shared, tmp_path)
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("o", path)
    store.filter("o", "hallucination", "o_f", action="flag", evidence="references",
                 reference_col="references", object_mode=VISUAL_MODE, similarity=OFF)
    log = store.query("SELECT image_id, action, reason FROM filter_log WHERE set_name = 'o_f' "
                      "ORDER BY row_idx, sentence_idx").rows
    assert len(log) >= len(rows)
    # recomputed by hand from the references: flagged exactly when a mention's category is
    # neither named by the image's references nor related to one by the hierarchy, nor a
    # part of a named whole, nor the backdrop (which costs a true flag here: 291712's "a
    # small boat in the sky with a", the references' boat is in the water)
    by_image = {r["image_id"]: r for r in rows}
    for iid, action, reason in log:
        rec = by_image[iid]
        named = named_categories(rec["references"])
        ok = related_categories(named) | BACKDROP
        ok |= {p for c in named for p in parts().get(c, ())}
        said = named_categories([rec["caption"]])   # Oscar's captions: one sentence each
        if "(count)" in reason or "(colour)" in reason:   # checked by hand below
            assert action == "flag"
            continue
        assert (action == "flag") == bool(said - ok), (rec, reason)
    assert any(a == "flag" for _, a, _ in log) and any(a == "keep" for _, a, _ in log)


def test_references_from_a_stored_set_and_a_file(tmp_path):
    import capaudit
    from capaudit.filters.base import FilterContext
    from capaudit.filters.reference_sources import load_references

    path = tmp_path / "refs.jsonl"
    path.write_text('{"image_id": 7, "caption": "a dog"}\n{"image_id": 7, "caption": "a cat"}\n'
                    '{"image_id": 8, "caption": "a tree"}\n')
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("refs", path)
    from capaudit.store import Store

    ctx = FilterContext(store=Store(tmp_path / "s.duckdb"))
    from_set, where = load_references("refs", None, ctx)
    assert from_set == {7: ["a dog", "a cat"], 8: ["a tree"]} and where == "references:store:refs"
    from_file, _ = load_references(str(path), None, ctx)
    assert from_file == from_set
    with pytest.raises(InputError, match="no such reference file or stored set"):
        load_references(str(tmp_path / "nope.jsonl"), None, ctx)


CASE = [{"image_id": 1, "caption": "A dog under a tree. A kite flies."},
        {"image_id": 2, "caption": "A cat on a bench. The sky is blue."}]
# by hand: image 1 has references, which judge every object (kite: named by none, dropped);
# image 2 has none: bench is COCO's (the ground truth lacks it: dropped), sky is not
# (undecided: kept)
KEPT = {1: "A dog under a tree.", 2: "The sky is blue."}


def _case_files(tmp_path):
    src = tmp_path / "in" / "a.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in CASE))
    gt = tmp_path / "gt.jsonl"
    gt.write_text('{"image_id": 1, "objects": ["dog"]}\n{"image_id": 2, "objects": ["cat"]}\n')
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"image_id": 1, "caption": "a dog lying under a tree"}\n')
    return src, gt, refs


def test_references_in_a_set_and_over_shards_decide_alike(tmp_path):
    import capaudit
    from shard_fixtures import run_cli

    src, gt, refs = _case_files(tmp_path)
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("a", src)
    _, summary = store.filter("a", "hallucination", "a_f", chair_gt=str(gt),
                              references=str(refs), object_mode=VISUAL_MODE)
    cats = summary.extra["evidence"]["categories"]   # COCO's 80, not the vocabulary's 1,522
    assert (cats["present"], cats["total"]) == (80, 80)
    got = {r["image_id"]: r["caption"] for r in map(json.loads, store.export(
        "a_f", "jsonl", tmp_path / "set_out.jsonl").read_text().splitlines())}
    assert got == KEPT
    assert run_cli("filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / "out",
                   "--filter", "hallucination", "--chair-gt", gt, "--references", refs,
                   "--object-mode", "visual", "--db", tmp_path / "s2.duckdb") == 0
    shard = {r["image_id"]: r["caption"] for r in
             map(json.loads, (tmp_path / "out" / "a.jsonl").read_text().splitlines())}
    assert shard == KEPT


def test_a_reference_column_travels_with_its_record_over_shards(tmp_path):
    """The hand-derived case, the references as each record's own field: the shards keep
    what the set run keeps (image 2's record has no field: undecided as without references)."""
    import capaudit
    from shard_fixtures import run_cli

    src, gt, _ = _case_files(tmp_path)
    rows = [{**CASE[0], "refs": ["a dog lying under a tree"]}, CASE[1]]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("a", src)
    store.filter("a", "hallucination", "a_f", chair_gt=str(gt), reference_col="refs",
                 object_mode=VISUAL_MODE)
    got = {r["image_id"]: r["caption"] for r in map(json.loads, store.export(
        "a_f", "jsonl", tmp_path / "set_out.jsonl").read_text().splitlines())}
    assert got == KEPT
    assert run_cli("filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / "out",
                   "--filter", "hallucination", "--chair-gt", gt, "--reference-col", "refs",
                   "--object-mode", "visual", "--db", tmp_path / "s2.duckdb") == 0
    shard = {r["image_id"]: r["caption"] for r in
             map(json.loads, (tmp_path / "out" / "a.jsonl").read_text().splitlines())}
    assert shard == KEPT
    # a CSV shard of the same records: the column travels as the JSONL field does (a list
    # as JSON text in the cell, a plain cell one text, an empty cell none)
    import csv
    (tmp_path / "c").mkdir()
    with open(tmp_path / "c" / "a.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "caption", "refs"])
        w.writerow([1, CASE[0]["caption"], json.dumps(["a dog lying under a tree"])])
        w.writerow([2, CASE[1]["caption"], ""])
    assert run_cli("filter", "run", "--shards", tmp_path / "c", "--out", tmp_path / "c_out",
                   "--filter", "hallucination", "--chair-gt", gt, "--reference-col", "refs",
                   "--object-mode", "visual", "--db", tmp_path / "s5.duckdb") == 0
    rows = list(csv.DictReader(open(tmp_path / "c_out" / "a.csv", newline="")))
    assert {int(r["image_id"]): r["caption"] for r in rows} == KEPT
    assert [r["refs"] for r in rows] == [json.dumps(["a dog lying under a tree"]), ""]
    # a column no record of the shard holds: the shard fails in one line, reported
    assert run_cli("filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / "out2",
                   "--filter", "hallucination", "--chair-gt", gt, "--reference-col", "nope",
                   "--object-mode", "visual", "--db", tmp_path / "s3.duckdb") == 2
    # references alone still need another evidence over shards
    assert run_cli("filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / "out3",
                   "--filter", "hallucination", "--evidence", "references", "--reference-col",
                   "refs", "--object-mode", "visual", "--db", tmp_path / "s4.duckdb") == 2


def test_reference_col_over_jsonl_and_parquet_shards_logs_as_the_set_run(shared, tmp_path):
    """40 real Oscar captions, each record with its image's COCO captions, judged with the
    real CHAIR ground truth and the column: the set run's log, sentence for sentence, from a
    JSONL shard, a parquet shard (a list<string> column), a webdataset tar (the field of
    each sample's .json) and a CSV shard (the list as JSON text in the cell)."""
    import csv
    import io
    import tarfile

    import capaudit
    import pyarrow as pa
    import pyarrow.parquet as pq
    from shard_fixtures import run_cli

    from capaudit.filters.logs import read_shard_log, sharded_run
    from capaudit.store import Store

    path, rows = _coco_set(shared, tmp_path)
    gt = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("o", path)
    store.filter("o", "hallucination", "o_f", action="flag", chair_gt=str(gt),
                 reference_col="references", object_mode=VISUAL_MODE)
    want = store.query("SELECT image_id, sentence_idx, action, reason FROM filter_log WHERE "
                       "set_name = 'o_f' ORDER BY row_idx, sentence_idx").rows
    assert any(a == "flag" and "references:" in r for _, _, a, r in want)
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "a.jsonl").write_text(path.read_text())
    (tmp_path / "p").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p" / "a.parquet")
    (tmp_path / "t").mkdir()
    with tarfile.open(tmp_path / "t" / "a.tar", "w") as tf:   # webdataset: the .json's field
        for i, rec in enumerate(rows):
            for ext, data in (("jpg", b"\xff\xd8"), ("json", json.dumps(rec).encode())):
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    (tmp_path / "c").mkdir()   # CSV: the references as JSON text in the cell
    with open(tmp_path / "c" / "a.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "caption", "references"])
        w.writerows([r["image_id"], r["caption"], json.dumps(r["references"])] for r in rows)
    for kind in ("j", "p", "t", "c"):
        db = tmp_path / f"{kind}.duckdb"
        assert run_cli("filter", "run", "--shards", tmp_path / kind, "--out",
                       tmp_path / f"{kind}_out", "--filter", "hallucination", "--action", "flag",
                       "--chair-gt", gt, "--reference-col", "references", "--object-mode",
                       "visual", "--db", db) == 0
        with Store(db, read_only=True) as st:
            info = sharded_run(st, str(tmp_path / f"{kind}_out"))
        got = [(r["image_id"], r["sentence_idx"], r["action"], r["reason"])
               for r in read_shard_log(info, None).to_pylist()]
        assert got == [tuple(r) for r in want], kind


def _judge_one(tmp_path, sentence: str) -> tuple[str, str]:
    """``(action, reason)`` of one sentence judged against two references by hand."""
    import capaudit

    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps({"image_id": 1, "caption": sentence,
                               "refs": ["One dog near a red bus.", "A red bus and a dog."]}) + "\n")
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("a", src)
    store.filter("a", "hallucination", "a_f", action="flag", evidence="references",
                 reference_col="refs", object_mode=VISUAL_MODE, similarity=OFF)
    (action, reason), = store.query("SELECT action, reason FROM filter_log").rows
    return action, reason


@pytest.mark.parametrize("sentence, reason", [
    ("Two dogs sleep.", "references: 2 against 1 (count)"),       # "One dog"
    ("A blue bus waits.", "references: blue against red (colour)"),
    ("Three dogs and a blue bus.", "references: 3 against 1 (count)"),
])
def test_counts_and_colours_against_the_references(tmp_path, sentence, reason):
    action, got = _judge_one(tmp_path, sentence)
    assert action == "flag" and reason in got


@pytest.mark.parametrize("sentence", ["A dog sleeps near a red bus.", "The dog and the bus.",
                                      "One dog waits.", "A yellow and red bus.",
                                      "Two buses."])   # no reference states the buses' number
def test_agreeing_or_unstated_counts_and_colours_stay_supported(tmp_path, sentence):
    assert _judge_one(tmp_path, sentence)[0] == "keep"


def test_attached_numbers_and_colours():
    from capaudit.text.attributes import attached

    toks = "two large brown dogs and a grey cat".split()
    assert attached(toks, 3) == (2, {"brown"})
    assert attached(toks, 7) == (None, {"gray"})          # an article is no count
    assert attached("a blue and yellow train".split(), 4) == (None, {"blue", "yellow"})
    assert attached("a couple of dogs".split(), 3) == (None, frozenset())
    assert attached("the dogs".split(), 1) == (None, frozenset())


def test_open_vocabulary_detections_read_as_phrases(tmp_path):
    import capaudit
    from capaudit.filters.phrase_detections import detections_as_categories

    dets = {1: {"palm trees": 0.9, "red double decker bus": 0.4, "sofa": 0.7, "gizmo": 0.8}}
    # by hand: plural and multi-word entries, a synonym (sofa -> couch), an unknown label kept
    assert detections_as_categories(dets, VISUAL_MODE) == {
        1: {"palm tree": 0.9, "bus": 0.4, "couch": 0.7, "gizmo": 0.8}}
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps({"image_id": 1, "caption": "A palm tree. A bus. A couch. A cat."})
                   + "\n")
    det = tmp_path / "det.jsonl"
    det.write_text(json.dumps({"image_id": 1, "detections": [
        {"label": k, "score": v} for k, v in dets[1].items()]}) + "\n")
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("a", src)
    store.filter("a", "hallucination", "a_f", action="flag", detections=str(det),
                 object_mode=VISUAL_MODE)
    acts = [a for a, in store.query("SELECT action FROM filter_log ORDER BY sentence_idx").rows]
    # threshold 0.5: palm tree and couch supported, bus (0.4) and cat (absent) flagged
    assert acts == ["keep", "flag", "keep", "flag"]
