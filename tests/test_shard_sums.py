"""When a sharded audit may add per-shard replicate sums (``sums_plan``): only when no image
has captions in two shards. An image id shared by the last caption of one shard and the
first of the next is the edge case: its id is both ranges' bound."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.audit.runner import DEFAULTS
from capaudit.audit.shards import run as sharded
from capaudit.audit.shards.sums import sums_plan
from capaudit.io.annotation_files import Annotations

POISSON = {"bootstrap": "poisson", "n_boot": 20}


def _part(units: int, unit_images: int, id_min, id_max) -> dict:
    return {"units": units, "unit_images": unit_images, "id_min": id_min, "id_max": id_max}


def test_ranges_that_share_their_bound_are_an_overlap():
    # shard 0 holds images 1..5, shard 1 images 5..9: image 5 has captions in both
    plan, why = sums_plan(POISSON, [_part(5, 5, 1, 5), _part(5, 5, 5, 9)])
    assert plan is None and "overlap" in why
    # listed out of order, the same two ranges
    plan, _ = sums_plan(POISSON, [_part(5, 5, 5, 9), _part(5, 5, 1, 5)])
    assert plan is None


def test_disjoint_ranges_give_counts_and_no_id_prefixes():
    # shard 0: images 1..4 plus 2 captions without an id (6 units); shard 1: images 5..7 and
    # 1 caption without an id; shard 2: only captions without an id (no range)
    parts = [_part(6, 4, 1, 4), _part(4, 3, 5, 7), _part(2, 0, None, None)]
    plan, why = sums_plan(POISSON, parts)
    assert why == "replicate sums per shard"
    # by hand: 12 units, 7 images; no-id captions before each shard: 0, 2, 2 + 1
    assert plan == {"n_units": 12, "n_images": 7, "prefix": [0, 2, 3]}


def test_exact_bootstrap_or_no_replicates_merge_per_image():
    parts = [_part(6, 4, 1, 4), _part(4, 3, 5, 7)]
    assert sums_plan({"bootstrap": "exact", "n_boot": 20}, parts)[0] is None
    assert sums_plan({"bootstrap": "poisson", "n_boot": 0}, parts)[0] is None


def _write_shards(folder: Path, ids: list[int], caps: list[str], per_shard: int) -> None:
    folder.mkdir(parents=True)
    for s in range(0, len(ids), per_shard):
        pq.write_table(pa.table({"key": [str(i) for i in ids[s:s + per_shard]],
                                 "caption": caps[s:s + per_shard]}),
                       folder / f"{s // per_shard:05d}.parquet")


def test_an_image_split_across_two_shards_is_counted_once(tmp_path):
    """Image 2 has two captions in shard 0 and one in shard 1: 4 images, not 5."""
    ids = [1, 1, 2, 2, 2, 3, 3, 4]
    caps = ["a dog", "a big dog", "two cats here", "a cat",
            "the cat sat", "x", "a red car", "one"]
    _write_shards(tmp_path / "set", ids, caps, 4)
    cfg = {**DEFAULTS, "metrics": ["length"], "workers": 1, **POISSON}
    res, _ = sharded.run_sharded(str(tmp_path / "set"), cfg, Annotations(), tmp_path / "w")
    assert res.meta["merge"] == "per-image states (image ids of two shards overlap)"
    assert res.meta["n_images"] == 4 and res.results["length"].n_images == 4
    # words per caption by hand: 2 3 3 2 3 1 3 1 = 18 over 8 captions
    assert res.results["length"].value == pytest.approx(18 / 8)
    assert res.results["length"].n == 8
