"""``sets add --format hf OWNER/NAME``: a Hub dataset read from the local cache, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CAPTIONS = {"train": [(391895, "A man riding a bike down a dirt road."),
                      (522418, "A woman cutting a large cake."),
                      (184613, "A boy holding an umbrella next to cows.")],
            "test": [(318219, "A kitchen with a stove and a sink.")]}


def _cache_dataset(hf_home: Path) -> None:
    """Write ``me/caps`` (splits train and test) into the datasets cache the way a first
    online ``load_dataset`` would leave it."""
    datasets = pytest.importorskip("datasets")
    from datasets.arrow_writer import ArrowWriter

    d = hf_home / "datasets" / "me___caps" / "default" / "0.0.0" / ("0" * 16)
    d.mkdir(parents=True)
    splits = {}
    for split, rows in CAPTIONS.items():
        ds = datasets.Dataset.from_dict({"cocoid": [r[0] for r in rows],
                                         "sentence": [r[1] for r in rows]})
        with ArrowWriter(path=str(d / f"caps-{split}.arrow")) as w:
            w.write_table(ds.data.table)
            n, nbytes = w.finalize()
        splits[split] = datasets.SplitInfo(split, num_bytes=nbytes, num_examples=n,
                                           dataset_name="caps")
    info = ds.info
    info.splits = datasets.SplitDict(splits)
    info.builder_name = info.dataset_name = "caps"
    info.config_name, info.version = "default", "0.0.0"
    info.write_to_directory(str(d))


def _capaudit(args, env):
    return subprocess.run([sys.executable, "-m", "capaudit.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_sets_add_hub_id_offline(tmp_path):
    _cache_dataset(tmp_path / "hf")
    db = tmp_path / "a.duckdb"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1"}
    ok = _capaudit(["sets", "add", "caps", "me/caps", "--format", "hf", "--split", "test",
                    "--caption-col", "sentence", "--id-col", "cocoid", "--db", str(db)], env)
    assert ok.returncode == 0, ok.stderr
    from capaudit.store import Store

    with Store(db, read_only=True) as store:
        info = store.get_set("caps")
        assert info.source_path == "me/caps" and info.options["split"] == "test"
        assert store.sql("SELECT image_id, caption FROM captions WHERE set_id = ?",
                         [info.set_id]) == CAPTIONS["test"]
    # the same dataset again: a no-op; a missing split or dataset: one line, exit 2
    again = _capaudit(["sets", "add", "caps", "me/caps", "--format", "hf", "--split", "test",
                       "--caption-col", "sentence", "--id-col", "cocoid", "--db", str(db)], env)
    assert again.returncode == 0 and "already present" in again.stdout
    bad = _capaudit(["sets", "add", "x", "me/caps", "--format", "hf", "--split", "val",
                     "--caption-col", "sentence", "--db", str(db)], env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "val" in bad.stderr
    gone = _capaudit(["sets", "add", "y", "me/nothere", "--format", "hf", "--db", str(db)], env)
    assert gone.returncode == 2 and "Hub dataset" in gone.stderr and "Traceback" not in gone.stderr
    nohint = _capaudit(["sets", "add", "z", "me/caps", "--db", str(db)], env)
    assert nohint.returncode == 2 and "--format hf" in nohint.stderr
