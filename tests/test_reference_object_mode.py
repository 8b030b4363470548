"""References bring object mode ``visual`` when no object mode is set (issue #42): the rule
of :data:`capaudit.filters.declared.CHOSEN`, applied where options get their defaults
(:func:`capaudit.filters.options.filter_options`), saved with the run and shown in its
summary; an explicit ``--object-mode`` keeps its reading; the shards decide as the set."""

from __future__ import annotations

import json

import pytest

from capaudit.filters.options import filter_options

#: three real Oscar captions of val2014 images and each image's five COCO captions
IDS = (353666, 163460, 408098)
WHY = "object mode visual: chosen because references were given"


def _case(shared, tmp_path):
    """The records (each with ``references``) and the CHAIR ground truth of :data:`IDS`."""
    coco = json.loads(shared("data", "coco2014", "captions_val2014_subset.json").read_text())
    refs: dict[int, list[str]] = {}
    for a in coco["annotations"]:
        if a["image_id"] in IDS:
            refs.setdefault(a["image_id"], []).append(a["caption"])
    rows = [{**r, "references": refs[r["image_id"]]} for r in map(
        json.loads, shared("data", "captioners", "oscar_val2014_all.jsonl").open())
        if r["image_id"] in IDS]
    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / "a.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    gt = tmp_path / "gt.jsonl"
    gt.write_text("".join(line for line in shared(
        "data", "coco2014", "chair_objects_trainval2014.jsonl").open()
        if json.loads(line)["image_id"] in IDS))
    return src, gt, rows


def _run(store, name: str, gt, **options):
    info, summary = store.filter("o", "hallucination", name, action="flag", chair_gt=str(gt),
                                 reference_col="references", **options)
    log = dict(store.query(f"SELECT image_id, action FROM filter_log WHERE set_name = "
                           f"'{name}'").rows)
    return log, summary.as_dict(), info


def test_references_without_an_object_mode_judge_the_tree(shared, tmp_path):
    """353666 "a woman in a red dress standing next to a tree": none of its five references
    names a tree (woman, dress, cell phone, park, grass), so with references the tree is
    unsupported; in corrected mode a tree is no COCO object and the sentence is kept.
    163460 "... on a tree branch": "tree" modifies "branch", which the references name: kept.
    408098 "a umbrella hanging from a tree": the references say a wooden post in the woods."""
    import capaudit

    src, gt, rows = _case(shared, tmp_path)
    assert "tree" in next(r["caption"] for r in rows if r["image_id"] == 353666)
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("o", src)
    log, summary, _ = _run(store, "o_default", gt)
    assert log == {353666: "flag", 163460: "keep", 408098: "flag"}
    assert summary["chosen"]["object_mode"].startswith(WHY)
    run_cfg = json.loads(store.query("SELECT config FROM filter_runs WHERE set_name = "
                                     "'o_default'").rows[0][0])
    assert run_cfg["object_mode"] == "visual" and run_cfg["chosen"] == summary["chosen"]
    log, summary, _ = _run(store, "o_corrected", gt, object_mode="corrected")
    assert log == {353666: "keep", 163460: "keep", 408098: "keep"}
    assert "chosen" not in summary
    log, summary, _ = _run(store, "o_visual", gt, object_mode="visual")   # given: no note
    assert log == {353666: "flag", 163460: "keep", 408098: "flag"} and "chosen" not in summary


def test_the_rule_in_filter_options(tmp_path):
    """Given, YAML and ``--filter.object_mode`` each count as set; without references the
    declared default stays; gender-balance's object mode has no rule."""
    opts = filter_options("hallucination", {"reference_col": "refs"})
    assert opts["object_mode"] == "visual" and opts.chosen["object_mode"].startswith(WHY)
    opts = filter_options("hallucination", {"references": "r.jsonl"})
    assert opts["object_mode"] == "visual"
    for given, overrides in (({"object_mode": "corrected"}, None),
                             ({}, {"object_mode": "reference"})):
        opts = filter_options("hallucination", {"reference_col": "refs", **given},
                              overrides=overrides)
        assert opts["object_mode"] == (given or overrides)["object_mode"] and not opts.chosen
    yaml = tmp_path / "c.yaml"
    yaml.write_text("filter:\n  object_mode: corrected\n")
    opts = filter_options("hallucination", {"reference_col": "refs"}, yaml)
    assert opts["object_mode"] == "corrected" and not opts.chosen
    yaml.write_text("filter:\n  reference_col: refs\n")
    assert filter_options("hallucination", {}, yaml)["object_mode"] == "visual"
    opts = filter_options("hallucination", {})
    assert opts["object_mode"] == "corrected" and not opts.chosen
    assert filter_options("hallucination", {"reference_col": ""})["object_mode"] == "corrected"
    opts = filter_options("gender-balance", {"by": "object"})
    assert opts["object_mode"] == "reference" and not opts.chosen


def test_shards_decide_as_the_set_and_say_why(shared, tmp_path):
    """``--reference-col`` over JSONL shards, no object mode: the set run's decisions,
    the note in the summary written beside DST."""
    import capaudit
    from shard_fixtures import run_cli

    src, gt, _ = _case(shared, tmp_path)
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("o", src)
    log, summary, _ = _run(store, "o_f", gt)
    assert run_cli("filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / "out",
                   "--filter", "hallucination", "--action", "flag", "--chair-gt", gt,
                   "--reference-col", "references", "--db", tmp_path / "s2.duckdb") == 0
    from capaudit.filters.logs import read_shard_log, sharded_run
    from capaudit.store import Store

    with Store(tmp_path / "s2.duckdb", read_only=True) as st:
        info = sharded_run(st, str(tmp_path / "out"))
    shard_log = {r["image_id"]: r["action"] for r in read_shard_log(info, None).to_pylist()}
    assert shard_log == log == {353666: "flag", 163460: "keep", 408098: "flag"}
    written = json.loads((tmp_path / "out.summary.json").read_text())
    assert written["summary"]["chosen"] == summary["chosen"]


@pytest.mark.parametrize("mode", ["corrected", "reference"])
def test_explicit_mode_decides_as_before(shared, tmp_path, mode):
    """An explicit COCO mode with references: no tree is judged (none of the three is
    flagged: their COCO objects are in the ground truth), nothing chosen."""
    import capaudit

    src, gt, _ = _case(shared, tmp_path)
    store = capaudit.open(tmp_path / "s.duckdb")
    store.add_set("o", src)
    log, summary, _ = _run(store, "o_m", gt, object_mode=mode)
    assert "chosen" not in summary and set(log.values()) == {"keep"}
