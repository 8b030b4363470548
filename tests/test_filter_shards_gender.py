"""``filter run --shards`` with gender-neutral and gender-balance (#44): the decisions of
``filter run SET`` on the same captions, shard by shard.

The independent way to the answer is the registered-set path: ``sets add`` of the one file
the shards were cut from, ``filter run SET``, ``sets export --to original``. The sharded run's
cleaned shards, joined in shard order, must be those bytes; its logs (every sentence, kept
ones too, with its reason) the store's ``filter_log`` rows; its summary the set's.

The corpus: the first 600 captions Show-Tell wrote for gender-labelled COCO val2014 images
(each image once), in 3 JSONL shards, with the images' real labels (Zhao et al.) and COCO
instance categories. gender-balance is a corpus-level decision (it undersamples across the
whole corpus): a per-shard decision would differ, and the test shows it does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shard_fixtures import run_cli

LOG_COLUMNS = ["filter", "image_id", "sentence_idx", "action", "reason", "original",
               "revised", "critique", "score"]
N, PARTS = 600, 3


def _demo(shared) -> Path:
    return shared("data", "coco2014", "demographics_val2014.jsonl")


SETTINGS = {   # name: (filter, extra options; DEMO stands for the demographics file)
    "neutral": ("gender-neutral", ["--demographics", "DEMO"]),
    "neutral-always": ("gender-neutral", ["--when", "always"]),
    "balance-overall": ("gender-balance", ["--demographics", "DEMO", "--seed", "7"]),
    "balance-object-words": ("gender-balance", ["--by", "object", "--min-images", "8",
                                                "--tolerance", "0.1"]),
    "balance-object-instances": ("gender-balance", ["--demographics", "DEMO", "--by", "object",
                                                    "--instances", "INST", "--min-images",
                                                    "10", "--tolerance", "0.1"]),
}


def _options(shared, extra: list[str]) -> list[str]:
    inst = shared("data", "coco2014", "instance_categories_val2014.jsonl")
    return [str(_demo(shared)) if a == "DEMO" else str(inst) if a == "INST" else a
            for a in extra]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from conftest import shared_path as shared

    tmp = tmp_path_factory.mktemp("gender")
    lines = shared("data", "captioners", "nic_val2014_gender.jsonl").read_text().splitlines()[:N]
    (tmp / "one.jsonl").write_text("\n".join(lines) + "\n")
    size = N // PARTS
    (tmp / "in").mkdir()
    for k in range(PARTS):
        (tmp / "in" / f"part-{k}.jsonl").write_text("\n".join(lines[k * size:(k + 1) * size])
                                                  + "\n")
    assert run_cli("sets", "add", "d", tmp / "one.jsonl", "--db", tmp / "set.duckdb") == 0
    return tmp, shared


def _set_run(tmp: Path, name: str, filt: str, opts: list[str]) -> tuple[bytes, pa.Table, dict]:
    from capaudit.filters.runner import filter_run_info, read_log
    from capaudit.store import Store

    db = tmp / "set.duckdb"
    assert run_cli("filter", "run", "d", "--filter", filt, "--out", name, *opts, "--db", db) == 0
    assert run_cli("sets", "export", name, "--to", "original", "--out", tmp / f"{name}.jsonl",
                   "--db", db) == 0
    store = Store(db, read_only=True)
    log = read_log(store, name, actions=None).sort_by([("row_idx", "ascending"),
                                                        ("sentence_idx", "ascending")])
    try:
        return (tmp / f"{name}.jsonl").read_bytes(), log, filter_run_info(store, name)["summary"]
    finally:
        store.close()


def shard_run(tmp: Path, src, out: Path, filt: str, opts: list[str], *extra) -> dict:
    assert run_cli("filter", "run", "--shards", src, "--out", out, "--filter", filt, *opts,
                   "--db", tmp / f"{out.name}.duckdb", *extra) == 0
    return json.loads(out.with_name(out.name + ".summary.json").read_text())["summary"]


def outputs(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(out.glob("*.jsonl")))


def shard_log(out: Path) -> pa.Table:
    folder = out.with_name(out.name + ".log")
    return pa.concat_tables(pq.read_table(p) for p in sorted(folder.glob("*.parquet")))


def same_summary(shards: dict, one: dict) -> None:
    assert {k: v for k, v in shards.items() if k not in ("shards", "records")} == one


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_shards_decide_as_the_registered_set(corpus, setting):
    tmp, shared = corpus
    filt, extra = SETTINGS[setting]
    opts = _options(shared, extra)
    want, want_log, want_summary = _set_run(tmp, f"d_{setting.replace('-', '_')}", filt, opts)
    summary = shard_run(tmp, tmp / "in", tmp / setting, filt, opts, "--workers", "2")
    assert outputs(tmp / setting) == want
    got_log = shard_log(tmp / setting)
    assert got_log.num_rows == N                      # one sentence a caption, every one logged
    assert got_log.select(LOG_COLUMNS).equals(want_log.select(LOG_COLUMNS))
    same_summary(summary, want_summary)
    changed = sum(a != "keep" for a in got_log.column("action").to_pylist())
    assert changed > 20                               # the filter did act on these captions
    assert summary["records"]["records_in"] == N


def test_balance_is_the_corpus_decision_not_each_shards(corpus):
    """Each shard balanced on its own keeps other images than the corpus balanced whole."""
    tmp, shared = corpus
    opts = _options(shared, SETTINGS["balance-overall"][1])
    whole = shard_run(tmp, tmp / "in", tmp / "bal", "gender-balance", opts)
    per_shard = [shard_run(tmp, tmp / "in" / f"part-{k}.jsonl", tmp / f"bal{k}",
                           "gender-balance", opts) for k in range(PARTS)]
    after = whole["balance"]["images_after"]
    assert after["man"] == after["woman"] > 0         # balanced over the corpus
    assert sum(s["captions_out"] for s in per_shard) != whole["captions_out"] or \
        b"".join(outputs(tmp / f"bal{k}") for k in range(PARTS)) != outputs(tmp / "bal")


@pytest.mark.ray
def test_ray_with_two_workers_matches_local(corpus):
    pytest.importorskip("ray")
    import ray

    tmp, shared = corpus
    runs = {s: _options(shared, SETTINGS[s][1]) for s in ("neutral", "balance-object-words")}
    local = {s: shard_run(tmp, tmp / "in", tmp / f"l-{s}", SETTINGS[s][0], o)
             for s, o in runs.items()}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = {s: shard_run(tmp, tmp / "in", tmp / f"r-{s}", SETTINGS[s][0], o, "--executor",
                            "ray", "--workers", "2") for s, o in runs.items()}
    finally:
        ray.shutdown()
    for s in runs:
        assert outputs(tmp / f"r-{s}") == outputs(tmp / f"l-{s}")
        assert shard_log(tmp / f"r-{s}").equals(shard_log(tmp / f"l-{s}"))
        assert {k: v for k, v in got[s].items() if k != "shards"} == \
            {k: v for k, v in local[s].items() if k != "shards"}


def test_a_filter_without_a_step_is_refused_in_one_line(corpus, monkeypatch, capsys):
    from capaudit.filters.shards import run

    tmp, shared = corpus
    monkeypatch.setattr(run, "SHARDED_FILTERS", ("hallucination",))
    capsys.readouterr()
    assert run_cli("filter", "run", "--shards", tmp / "in", "--out", tmp / "no", "--filter",
                   "gender-neutral", "--when", "always", "--db", tmp / "no.duckdb") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not 'gender-neutral'" in err[0] and "steps.py" in err[0]
    assert not (tmp / "no").exists()
