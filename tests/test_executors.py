"""Executors: the same shard function, identical outputs in-process, in a pool, on Ray."""

from __future__ import annotations

import pytest

from capaudit.enrich.runner import run_enrich
from capaudit.errors import InputError
from capaudit.executors import EXECUTORS, get_executor
from test_enrich_fixtures import base_config, make_dataset


def _square(x):
    return x * x


def test_registry_and_local_map():
    assert EXECUTORS.names() == ["local", "ray"]
    with pytest.raises(InputError, match="did you mean 'local'"):
        EXECUTORS.entry("locl")
    ex = get_executor("local", workers=1)
    assert sorted(r for _, r in ex.map_unordered(_square, [1, 2, 3])) == [1, 4, 9]


def _outputs(work):
    return {p.name: p.read_bytes() for p in sorted(work.glob("*.jsonl"))}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exec")
    _, shards, _ = make_dataset(tmp, n_images=6, shard_size=2)
    return tmp, shards


def test_local_pool_matches_in_process(dataset):
    tmp, shards = dataset
    cfg = base_config(backend="echo")
    cfg["captions"] = "all"
    one = run_enrich(shards, tmp / "w1", "capsfusion", cfg, workers=1)
    two = run_enrich(shards, tmp / "w2", "capsfusion", cfg, executor="local", workers=2)
    assert one["table"].equals(two["table"]) and one["table"].num_rows == 12
    assert _outputs(tmp / "w1") == _outputs(tmp / "w2")
    assert two["shards_run"] == 3 and two["stats"]["requests"] == one["stats"]["requests"]


@pytest.mark.ray
def test_ray_matches_local(dataset):
    pytest.importorskip("ray")
    tmp, shards = dataset
    cfg = base_config(backend="echo")
    local = run_enrich(shards, tmp / "wl", "capsfusion", cfg)
    ray_run = run_enrich(shards, tmp / "wr", "capsfusion", cfg, executor="ray", workers=2)
    assert local["table"].equals(ray_run["table"])
    assert _outputs(tmp / "wl") == _outputs(tmp / "wr")
