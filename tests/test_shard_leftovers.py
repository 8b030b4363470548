"""``audit run --shards`` leftovers of issue #16: per-caption details in the store, the
annotation coverage rule merged over shards, --lic and --lexicon/--corrected refused in one
line, replicate sums per shard (driver memory free of the image count), hostile shards."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.audit.shards import run as sharded, sums as shard_sums
from capaudit.metrics import METRICS, Metric, register_metric
from capaudit.metrics.base import Estimate
from capaudit.metrics.state import UnitCells
from capaudit.audit.runner import DEFAULTS
from capaudit.io.annotation_files import Annotations
from test_audit_sharded import _annotations
from test_hostile_shards import cli  # noqa: F401  (fixture: the CLI in-process)

COCO = ("data", "coco2014")


def _oscar(shared, n: int, sort: bool = False) -> list[dict]:
    path = shared("data", "captioners", "oscar_val2014_all.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()[:n]]
    return sorted(rows, key=lambda r: r["image_id"]) if sort else rows


def _shards(folder: Path, keys: list, caps: list, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-len(caps) // n)
    for s in range(n):
        sl = slice(s * step, (s + 1) * step)
        pq.write_table(pa.table({"key": [str(k) for k in keys[sl]], "caption": caps[sl]}),
                       folder / f"{s:05d}.parquet")
    return folder


def _ann_args(shared) -> list[str]:
    c = shared(*COCO)
    return ["--instances", str(c / "instance_categories_val2014.jsonl"),
            "--chair-gt", str(c / "chair_objects_trainval2014.jsonl"),
            "--demographics", str(c / "demographics_val2014.jsonl")]


def _details(db: Path, run_id: int) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    cols = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                      "WHERE table_name = 'caption_details'").fetchall()
            if r[0] not in ("run_id", "set_name")]
    rows = con.execute(f"SELECT {', '.join(cols)} FROM caption_details WHERE run_id = ? "
                       "ORDER BY row_idx", [run_id]).fetchall()
    con.close()
    return rows


@pytest.mark.slow
def test_sharded_details_and_coverage_equal_the_single_file_audit(shared, tmp_path, cli):
    rows = _oscar(shared, 900)
    keys = [r["image_id"] if i % 9 else f"uid-{i}" for i, r in enumerate(rows)]
    caps = [r["caption"] for r in rows]
    _shards(tmp_path / "set", keys, caps, 3)
    (tmp_path / "set.jsonl").write_text("".join(
        json.dumps({"image_id": k if isinstance(k, int) else None, "caption": c}) + "\n"
        for k, c in zip(keys, caps)))
    db, common = tmp_path / "a.duckdb", ["--n-boot", "20", "--db", str(tmp_path / "a.duckdb")]
    one = cli("audit", "run", str(tmp_path / "set.jsonl"), *common, *_ann_args(shared),
              "--json", str(tmp_path / "one.json"))
    three = cli("audit", "run", "--shards", str(tmp_path / "set"), *common, *_ann_args(shared),
                "--work-dir", str(tmp_path / "w"), "--json", str(tmp_path / "three.json"))
    assert one.returncode == 0 and three.returncode == 0, one.stderr + three.stderr
    # the same rows, column by column (row_idx 0..899 in file order), as the single-file audit
    d1, d3 = _details(db, 1), _details(db, 2)
    assert len(d1) == 900 and d1 == d3
    j1, j3 = (json.loads((tmp_path / f).read_text()) for f in ("one.json", "three.json"))
    assert j1["sets"]["set"] == j3["sets"]["set"]
    cov1, cov3 = j1["coverage"]["set"], j3["coverage"]["set"]
    # 800 images with an id + 100 captions without one, each its own unit (the single-file
    # check counts distinct image keys, and these JSONL rows share the key null: 801)
    assert cov3["n_images"] == 900 and cov1["n_images"] == 801
    assert cov3["covered"] == cov1["covered"] and cov3["n_with_ids"] == cov1["n_with_ids"] == 800
    assert cov3["covered"]["instances"] == 800 and "900 images" in three.stdout


@pytest.mark.slow
def test_shards_of_other_images_are_refused_by_the_coverage_rule(shared, tmp_path, cli):
    # ids 1..300 joined with COCO val2014 instances: a few exist there by accident
    caps = [r["caption"] for r in _oscar(shared, 300)]
    _shards(tmp_path / "set", list(range(1, 301)), caps, 2)
    inst = shared(*COCO) / "instance_categories_val2014.jsonl"
    have = {json.loads(line)["image_id"] for line in inst.read_text().splitlines()}
    n_cov = len(have & set(range(1, 301)))
    args = ["audit", "run", "--shards", str(tmp_path / "set"), "--instances", str(inst),
            "--metrics", "recall,length", "--n-boot", "10", "--db", str(tmp_path / "b.duckdb")]
    got = cli(*args, "--work-dir", str(tmp_path / "w"))
    assert got.returncode == 2 and got.stdout == ""
    line = got.stderr.strip()
    assert "\n" not in line and f"only {n_cov:,} of the 300 images of 'set'" in line
    # unassigned ids against coco2014 instances: a few matches are no evidence, and
    # --allow-partial does not join them (#46) ...
    assert "--allow-partial never joins unassigned ids" in line
    again = cli(*args, "--work-dir", str(tmp_path / "w"), "--allow-partial")
    assert again.returncode == 2 and again.stderr.strip() == line
    # ... while instances of no named dataset may be joined in part: the shards resume
    unnamed = tmp_path / "instances.jsonl"
    unnamed.write_bytes(inst.read_bytes())
    args[args.index(str(inst))] = str(unnamed)
    ok = cli(*args, "--work-dir", str(tmp_path / "w"), "--allow-partial")  # resumes the shards
    assert ok.returncode == 0 and f"instances {n_cov:,}" in ok.stdout


def test_mixed_namespaces_across_shards_join_only_where_the_evidence_allows(shared, tmp_path):
    from capaudit.io.annotation_files import load_instances

    rows = _oscar(shared, 200)
    inst, _ = load_instances(shared(*COCO) / "instance_categories_val2014.jsonl")
    ann = Annotations(instances=inst, sources={"instances": str(
        shared(*COCO) / "instance_categories_val2014.jsonl")})
    folder = tmp_path / "set"
    _shards(folder, [f"COCO_val2014_{r['image_id']:012d}.jpg" for r in rows[:100]],
            [r["caption"] for r in rows[:100]], 1)
    # the same numbers under a flickr30k folder: other images, never joined with COCO's
    pq.write_table(pa.table({"key": [f"flickr30k/{r['image_id']}.jpg" for r in rows[100:]],
                             "caption": [r["caption"] for r in rows[100:]]}),
                   folder / "00001.parquet")
    cfg = {**DEFAULTS, "metrics": ["recall", "length"], "n_boot": 10, "workers": 1,
           "allow_partial": True}
    res, _ = sharded.run_sharded(str(folder), cfg, ann, tmp_path / "w")
    cov = res.meta["coverage"]
    assert cov["namespace"] == "mixed" and cov["namespaces"]["instances"] == "coco2014"
    assert cov["covered"]["instances"] == 100 and cov["n_images"] == 200
    # recall counts captions of images with an instance category: of the COCO shard only (the
    # flickr captions are their own units), else about twice as many
    assert res.results["recall"].n == sum(1 for r in rows[:100] if inst.get(r["image_id"]))


def test_lic_in_sharded_mode_is_refused_in_one_line(shared, tmp_path, cli):
    _shards(tmp_path / "set", [1, 2], ["a dog", "a cat"], 1)
    got = cli("audit", "run", "--shards", str(tmp_path / "set"), "--lic",
              "--db", str(tmp_path / "b.duckdb"), "--work-dir", str(tmp_path / "w"))
    assert got.returncode == 2 and got.stderr.count("\n") == 1
    assert "--lic" in got.stderr and "capaudit audit lic" in got.stderr
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("flag", [["--corrected"], ["--mode", "corrected"]])
def test_lexicon_with_corrected_is_refused_not_silently_ignored(tmp_path, cli, flag):
    (tmp_path / "lex.txt").write_text("dog, puppy\nsofa, couch\n")
    (tmp_path / "c.jsonl").write_text('{"image_id": 1, "caption": "A puppy on a couch."}\n')
    (tmp_path / "i.jsonl").write_text('{"image_id": 1, "categories": ["dog"]}\n')
    args = ["audit", "run", str(tmp_path / "c.jsonl"), "--lexicon", str(tmp_path / "lex.txt"),
            "--instances", str(tmp_path / "i.jsonl"), "--metrics", "recall", "--n-boot", "5",
            "--db", str(tmp_path / "b.duckdb"), "--json", str(tmp_path / "o.json")]
    got = cli(*args, *flag)
    # before: exit 0 and no recall_corrected (the flag was dropped without a word)
    assert got.returncode == 2 and got.stderr.count("\n") == 1 and "lex.txt" in got.stderr
    assert f"drop {' '.join(flag)}" in got.stderr and not (tmp_path / "o.json").exists()
    ok = cli(*args)
    assert ok.returncode == 0
    # by hand: image 1 has {dog}; the caption names dog (puppy) and sofa (couch): recall 100
    assert json.loads((tmp_path / "o.json").read_text())["sets"]["c"]["recall"]["value"] == 100


def _cfg(**kw) -> dict:
    return {**DEFAULTS, "n_boot": 60, "workers": 1, "chunk_size": 400, "bootstrap": "poisson",
            **kw}


def _barred(folder: Path, cfg: dict, ann, work: Path):
    """The audit and its progress bar's ``(completed, total)`` at the end."""
    from capaudit.cli.common import ShardProgress

    with ShardProgress("auditing shards", "n_captions") as bar:
        res, _ = sharded.run_sharded(str(folder), cfg, ann, work, on_start=bar.start,
                                     on_shard=bar.shard)
    task = bar.bar.tasks[0]
    return res, (task.completed, task.total)


def test_replicate_sums_per_shard_equal_the_per_image_merge(shared, tmp_path, monkeypatch):
    """Sorted ids (no image in two shards) and captions without an id: the shards' replicate
    sums give the per-image path's values up to the order of floating-point additions."""
    rows = _oscar(shared, 1500, sort=True)
    keys = [r["image_id"] if i % 7 else f"uid-{i}" for i, r in enumerate(rows)]
    folder = _shards(tmp_path / "set", keys, [r["caption"] for r in rows], 4)
    ann = _annotations(shared)
    cfg = _cfg(metrics=["vocab", "length", "recall", "gender_error", "recall_disparity",
                        "chair_s", "chair_i"], corrected=True, min_images=3)
    fast, bars = _barred(folder, cfg, ann, tmp_path / "w")
    monkeypatch.setattr(shard_sums, "sums_plan", lambda cfg, parts: (None, "per-image"))
    slow, bars_slow = _barred(folder, cfg, ann, tmp_path / "w")
    assert fast.meta["merge"] == "replicate sums per shard"
    assert slow.meta["merge"] == "per-image"
    assert bars == (8, 8) and bars_slow == (4, 4)   # no sums pass: the bar's total is 4 jobs
    assert list(fast.results) == list(slow.results) and "recall_corrected" in fast.results
    assert fast.results["recall_disparity"].extra["m"] > 3   # categories chosen on all shards
    for name, a in fast.results.items():
        b = slow.results[name]
        assert a.n == b.n and a.extra == b.extra, name
        for x, y in ((a.value, b.value), (a.ci_low, b.ci_low), (a.ci_high, b.ci_high)):
            assert x == pytest.approx(y, rel=1e-12, abs=1e-12), name
    assert fast.meta["n_images"] == slow.meta["n_images"]


def test_replicate_sums_fall_back_where_they_cannot_be_used(shared, tmp_path):
    rows = _oscar(shared, 600)            # oscar's file order: the shards' id ranges overlap
    folder = _shards(tmp_path / "set", [r["image_id"] for r in rows],
                     [r["caption"] for r in rows], 3)
    res, _ = sharded.run_sharded(str(folder), _cfg(metrics=["length"]), Annotations(),
                                 tmp_path / "w")
    assert res.meta["merge"] == "per-image states (image ids of two shards overlap)"
    srt = _oscar(shared, 600, sort=True)
    folder = _shards(tmp_path / "sorted", [r["image_id"] for r in srt],
                     [r["caption"] for r in srt], 3)
    register_metric(CaptionCells)   # a plugin whose state is not a per-image sum
    try:
        res, _ = sharded.run_sharded(str(folder), _cfg(metrics=["length", "cells_test"]),
                                     Annotations(), tmp_path / "w2")
    finally:
        METRICS._entries.pop("cells_test", None)
    assert res.meta["merge"] == "per-image states (metric cells_test is not a sum)"
    assert res.results["cells_test"].value == 600 and res.results["cells_test"].ci_low == 600
    res, _ = sharded.run_sharded(str(folder), _cfg(metrics=["length"], bootstrap="auto"), Annotations(),
                                 tmp_path / "w3")
    # auto below POISSON_MIN_UNITS: no replicate sums; the lengths of one caption per image take
    # few distinct values, so the interval is drawn by groups (audit/bootstrap_grouped.py)
    assert res.meta["merge"] == "per-image states (exact bootstrap)" and res.results["length"].extra[
        "bootstrap"] == "grouped"


def test_a_shard_killed_mid_write_is_redone_and_its_details_are_whole(shared, tmp_path):
    rows = _oscar(shared, 600)
    folder = _shards(tmp_path / "set", [r["image_id"] for r in rows],
                     [r["caption"] for r in rows], 3)
    cfg = {**DEFAULTS, "metrics": ["length"], "n_boot": 10, "workers": 1}
    first, _ = sharded.run_sharded(str(folder), cfg, Annotations(), tmp_path / "w")
    work = first.meta["details_files"][0][0].parent
    # shard 0 killed after its details were renamed, before its marker; shard 1's details file
    # cut short (its marker says another size); a writer's leftover temp file
    (work / "00000.done.json").unlink()
    d1 = work / "00001.details.parquet"
    d1.write_bytes(d1.read_bytes()[:100])
    (work / "00002.details.parquet.tmp-999").write_bytes(b"PAR1 half")
    again, summaries = sharded.run_sharded(str(folder), cfg, Annotations(), tmp_path / "w")
    assert [s["status"] for s in summaries] == ["done", "done", "resumed"]
    assert not (work / "00002.details.parquet.tmp-999").exists()
    n = [pq.ParquetFile(p).metadata.num_rows for p, _, _ in again.meta["details_files"]]
    assert n == [200, 200, 200] and [f for _, _, f in again.meta["details_files"]] == [0, 200, 400]
    assert again.to_dict() == first.to_dict()


def test_empty_shards_and_a_caption_file_given_as_shards(shared, tmp_path, cli):
    folder = _shards(tmp_path / "set", [1, 2], ["A dog.", "Two cats."], 1)
    pq.write_table(pa.table({"key": pa.array([], pa.string()),
                             "caption": pa.array([], pa.string())}), folder / "00001.parquet")
    res, summaries = sharded.run_sharded(str(folder), {**DEFAULTS, "metrics": ["length"],
                                                       "n_boot": 10}, Annotations(),
                                         tmp_path / "w")
    # tokens by hand: "A dog ." 3, "Two cats ." 3
    assert res.results["length"].value == 3.0 and summaries[1]["n_captions"] == 0
    assert [f for _, _, f in res.meta["details_files"]] == [0]   # nothing to copy for 00001
    (tmp_path / "c.jsonl").write_text('{"image_id": 1, "caption": "A dog."}\n')
    got = cli("audit", "run", "--shards", str(tmp_path / "c.jsonl"), "--db",
              str(tmp_path / "b.duckdb"))
    assert got.returncode == 2 and got.stderr.count("\n") == 1
    assert f"capaudit audit run {tmp_path / 'c.jsonl'}" in got.stderr


class CaptionCells(Metric):
    """Toy plugin: captions counted in (unit, 0) cells; its value is their total."""
    name, label, description = "cells_test", "Cells", "toy"
    direction, criterion = 1, "complexity"

    def update(self, ctx):
        return UnitCells.of(ctx.unit_keys[ctx.unit], np.zeros(len(ctx.records), np.int64))

    def finalize(self, state, units):
        stats = np.zeros((units.n, 1))
        np.add.at(stats[:, 0], units.index(state.keys), state.vals)
        return Estimate(stats, lambda t: t[..., 0] * 0 + stats.sum(), int(stats.sum()))


def test_details_can_be_turned_off(tmp_path):
    folder = _shards(tmp_path / "set", [1, 2], ["A dog.", "Two cats."], 1)
    cfg = {**DEFAULTS, "metrics": ["length"], "n_boot": 10, "details": False}
    res, _ = sharded.run_sharded(str(folder), cfg, Annotations(), tmp_path / "w")
    assert res.meta["details_files"] == [] and not list((tmp_path / "w").rglob("*.parquet"))
    on, _ = sharded.run_sharded(str(folder), {**cfg, "details": True}, Annotations(),
                                tmp_path / "w")   # same states, now with details: redone
    assert len(list((tmp_path / "w").rglob("*.details.parquet"))) == 1
    assert on.to_dict() == res.to_dict()


def test_a_details_file_lost_before_the_copy_is_one_line_and_nothing_is_stored(tmp_path,
                                                                                monkeypatch):
    from capaudit.audit.shards import outputs as shard_outputs
    from capaudit.errors import InputError
    from capaudit.store import Store

    folder = _shards(tmp_path / "set", [1, 2, 3], ["A dog.", "Two cats.", "A bus."], 1)
    cfg = {**DEFAULTS, "metrics": ["length"], "n_boot": 10}
    res, _ = sharded.run_sharded(str(folder), cfg, Annotations(), tmp_path / "w")
    files = res.meta["details_files"]
    files[0][0].write_bytes(b"PAR1 not parquet PAR1")   # replaced after the run, before the copy
    store = Store(tmp_path / "s.duckdb")
    with pytest.raises(InputError, match=r"00000.details.parquet.*cannot read the shard's "
                                         r"caption details.*rerun"):
        with store.transaction():
            store.con.execute("INSERT INTO caption_details (run_id, set_name, row_idx) "
                              "VALUES (99, 'x', 0)")
            shard_outputs.attach_details(store, 99, "x", files)
    assert store.con.execute("SELECT count(*) FROM caption_details").fetchone()[0] == 0


@pytest.mark.slow
def test_partly_annotated_shards_join_exactly_as_the_single_file_audit(shared, tmp_path, cli):
    """60% of the images annotated (above --min-coverage): the single-file audit hides the
    other ids (their captions become their own units); the shards must do the same."""
    rows = _oscar(shared, 600)
    c = shared(*COCO)
    inst = {json.loads(x)["image_id"]: x for x in
            (c / "instance_categories_val2014.jsonl").read_text().splitlines()}
    part = [inst[r["image_id"]] for i, r in enumerate(rows) if i % 5 < 3]
    (tmp_path / "inst.jsonl").write_text("\n".join(part) + "\n")
    _shards(tmp_path / "set", [r["image_id"] for r in rows], [r["caption"] for r in rows], 3)
    (tmp_path / "set.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ["--n-boot", "30", "--db", str(tmp_path / "a.duckdb"), "--metrics",
              "recall,length,vocab", "--instances", str(tmp_path / "inst.jsonl")]
    one = cli("audit", "run", str(tmp_path / "set.jsonl"), *common,
              "--json", str(tmp_path / "one.json"))
    three = cli("audit", "run", "--shards", str(tmp_path / "set"), *common,
                "--work-dir", str(tmp_path / "w"), "--json", str(tmp_path / "three.json"))
    assert one.returncode == 0 and three.returncode == 0, one.stderr + three.stderr
    j1, j3 = (json.loads((tmp_path / f).read_text()) for f in ("one.json", "three.json"))
    assert j1["sets"]["set"] == j3["sets"]["set"]   # units included: the intervals agree
    assert j3["coverage"]["set"]["covered"] == j1["coverage"]["set"]["covered"] == {
        "instances": 360}
    d1, d3 = _details(tmp_path / "a.duckdb", 1), _details(tmp_path / "a.duckdb", 2)
    assert d1 == d3 and sum(r[1] is None for r in d3) == 240   # 240 ids hidden in both


def test_vocabulary_without_rare_tokens_in_replicate_sums(tmp_path):
    """Every token used more than 64 times (no posting lists): the interval is the count."""
    caps = ["A dog runs."] * 130 + ["A cat runs."] * 130
    ids = list(range(1, 261))
    folder = _shards(tmp_path / "set", ids, caps, 2)
    res, _ = sharded.run_sharded(str(folder), _cfg(metrics=["vocab"]), Annotations(),
                                 tmp_path / "w")
    assert res.meta["merge"] == "replicate sums per shard"
    # a, dog, cat, runs, '.' (lowercased): 5 tokens, each in >= 130 captions
    v = res.results["vocab"]
    assert (v.value, v.ci_low, v.ci_high) == (5.0, 5.0, 5.0) and v.extra["rare_tokens"] == 0
