"""A sharded filter's evidence file (filters/shards/evidence_file): converted in the driver
(files up to IN_DRIVER_BYTES) or in a child process, with the same arrays, digest, source and
one-line errors either way."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capaudit.errors import CapauditError
from capaudit.filters.shards import evidence_file as ef
from tests.conftest import shared_path

GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")


def _both(ref, tmp_path):
    here = ef.convert_here("chair-gt", str(ref), str(tmp_path / "here"))
    child = ef.convert_in_child("chair-gt", str(ref), str(tmp_path / "child"))
    return here, child


def test_a_small_file_gives_the_childs_arrays_digest_and_source(tmp_path):
    rows = [{"image_id": 42, "objects": ["dog", "person"]}, {"image_id": 9, "objects": []},
            {"image_id": 7, "objects": ["person", "dog", "dog"]}]
    ref = tmp_path / "gt.jsonl"
    ref.write_text("".join(json.dumps(r) + "\n" for r in rows))
    here, child = _both(ref, tmp_path)
    assert here[1:] == child[1:] and here[2] == f"file:{ref}"
    support = ef.read_evidence(here[0], here[1])
    assert support[42] == {"dog": 1.0, "person": 1.0} and support[9] == {}
    assert support[7] == {"dog": 1.0, "person": 1.0} and 8 not in support
    assert (np.load(here[0])["ids"] == [7, 9, 42]).all()


def test_cocos_ground_truth_is_converted_in_the_driver_the_same_way(tmp_path):
    ref = shared_path(*GT)
    assert ref.stat().st_size <= ef.IN_DRIVER_BYTES   # the benchmarks' evidence takes this path
    here, child = _both(ref, tmp_path)
    assert here[1:] == child[1:]
    assert len(ef.read_evidence(here[0], here[1]).ids) == sum(1 for _ in open(ref))


def test_a_bad_file_gives_the_childs_one_line(tmp_path):
    ref = tmp_path / "bad.jsonl"
    ref.write_text('{"image_id": 1, "objects": ["dog"]}\n{"image_id": "x", "objects": 3}\n')
    messages = []
    for convert in (ef.convert_here, ef.convert_in_child):
        with pytest.raises(CapauditError) as err:
            convert("chair-gt", str(ref), str(tmp_path / convert.__name__))
        assert type(err.value) is CapauditError
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "bad.jsonl" in messages[0]
