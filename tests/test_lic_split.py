"""The balanced LIC split: sizes, balance, disjointness and per-seed determinism."""

import json
import os
from pathlib import Path

import pytest

from capaudit.audit.lic.split import balanced_split
from capaudit.errors import InputError

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1] / ".." / "shared")


def _synthetic(n_male=100, n_female=33):
    items = list(range(1, n_male + n_female + 1))
    labels = {i: ("male" if i <= n_male else "female") for i in items}
    labels[999] = None
    return items + [999], labels


def test_sizes_and_balance():
    items, labels = _synthetic()
    s = balanced_split(items, labels, ("male", "female"), seed=0)
    n_test = round(33 * 0.1)
    assert len(s.test) == 2 * n_test and sum(s.test_labels) == n_test
    assert len(s.train) == 2 * (33 - n_test) and sum(s.train_labels) == 33 - n_test
    assert not set(s.train) & set(s.test) and 999 not in s.train + s.test
    for it, lab in zip(s.train + s.test, s.train_labels + s.test_labels):
        assert labels[it] == ("female" if lab else "male")
    # every minority item is used, the majority is subsampled
    assert {i for i in items if labels[i] == "female"} <= set(s.train + s.test)


def test_deterministic_per_seed_and_seed_dependent():
    items, labels = _synthetic()
    a = balanced_split(items, labels, ("male", "female"), seed=12)
    b = balanced_split(items, labels, ("male", "female"), seed=12)
    c = balanced_split(items, labels, ("male", "female"), seed=456)
    assert a == b
    assert a.test != c.test


def test_too_few_items():
    with pytest.raises(InputError):
        balanced_split([1, 2, 3], {1: "male", 2: "female", 3: "male"}, ("male", "female"), seed=0)


@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason="shared data folder not found")
def test_real_gender_split_sizes():
    from capaudit.io.annotation_files import load_demographics

    gender, skin = load_demographics(SHARED / "data/coco2014/demographics_val2014.jsonl")
    ids = [json.loads(l)["image_id"] for l in open(SHARED / "data/captioners/oscar_val2014_gender.jsonl")]
    for seed in (0, 1234):
        s = balanced_split(ids, gender, ("male", "female"), seed)
        assert (len(s.train), len(s.test)) == (5966, 662)   # 3314 women: 331 test + 2983 train each
    s = balanced_split(ids, skin, ("light", "dark"), 0)
    assert (len(s.train), len(s.test)) == (2 * 846, 2 * 94)  # 940 dark-skinned images
