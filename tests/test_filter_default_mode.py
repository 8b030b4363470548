"""#34.4: the hallucination filter's default object mode is the one with fewer false drops
(``corrected``; measured by benchmarks/filter_object_modes.py, docs/filters.md). The cases
are real captions read by hand against the image's instance annotations, and the
benchmark's count is checked on them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from capaudit.filters.base import CaptionDoc
from capaudit.filters.runner import apply_filter

REPO = Path(__file__).resolve().parents[1]
GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
INSTANCES = ("data", "coco2014", "instance_categories_val2014.jsonl")
PLANES = "There are two large passenger airplanes visible in the image."


def _line(shared, name: str, image_id: int, caption: str) -> CaptionDoc:
    """The caption as the captioner file holds it (found there, not typed in)."""
    for row, line in enumerate(shared("data", "captioners", name).open(encoding="utf-8")):
        rec = json.loads(line)
        if rec["image_id"] == image_id and rec["caption"] == caption:
            return CaptionDoc(row, image_id, caption)
    raise AssertionError(f"{caption!r} not in {name}")


@pytest.fixture(scope="module")
def evidence():
    from capaudit.filters.evidence import load_evidence
    from tests.conftest import shared_path

    return (load_evidence("chair-gt", shared_path(*GT)),
            load_evidence("instances", shared_path(*INSTANCES)))


def _docs(shared):
    llava = [json.loads(x) for x in shared("data", "real",
                                            "llava_coco2014_val_gpt4_qa_30x3.jsonl").open()]
    plane = next(r for r in llava if PLANES in r["output"])
    assert plane["image"] == "COCO_val2014_000000258285.jpg"
    return [
        # image 485139: cat, chair, laptop; "orange" is the cat's colour, not the fruit
        _line(shared, "oscar_val2014_all.jsonl", 485139, "a orange cat laying on top of a laptop"),
        # image 209347: cell phone, person, train; no bus (COCO's instances and CHAIR's)
        _line(shared, "att2in_val2014_gender.jsonl", 209347,
              "a woman sitting on a bus with a cell phone"),
        # image 258285: airplane, bird; the passengers are not in the picture
        CaptionDoc(2, 258285, PLANES),
    ]


def test_default_is_corrected_and_keeps_the_correct_sentences(shared, evidence):
    from capaudit.filters.declared import DEFAULTS
    from capaudit.filters.hallucination import HallucinationFilter

    assert DEFAULTS["hallucination"]["object_mode"] == "corrected"
    gt, _ = evidence
    docs = _docs(shared)
    default = apply_filter(HallucinationFilter(gt), docs).log["action"]
    reference = apply_filter(HallucinationFilter(gt, object_mode="reference"), docs).log["action"]
    # by hand: the cat and the airplanes sentences are right, the bus one names a bus the
    # image does not hold (the reference reads "bus" as "bu" and misses it)
    assert default == ["keep", "drop", "keep"]
    assert reference == ["drop", "keep", "drop"]


def test_benchmark_counts_false_drops_as_read_by_hand(shared, evidence):
    spec = importlib.util.spec_from_file_location(
        "filter_object_modes", REPO / "benchmarks" / "filter_object_modes.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    gt, instances = evidence
    row = bench.measure("three", _docs(shared), gt, {i: set(c) for i, c in instances.items()},
                        "instances")
    assert (row["reference"]["dropped"], row["reference"]["false_drops"]) == (2, 2)
    assert (row["corrected"]["dropped"], row["corrected"]["false_drops"]) == (1, 0)
    assert row["reference"]["unadjudicated"] == row["corrected"]["unadjudicated"] == 0


def test_cli_default_keeps_the_passenger_airplanes(shared, tmp_path):
    from capaudit.cli.main import main
    from capaudit.store import Store

    db = str(tmp_path / "m.duckdb")
    assert main(["sets", "add", "llava", str(shared("data", "real",
                 "llava_coco2014_val_gpt4_qa_30x3.jsonl")), "--db", db]) == 0
    assert main(["filter", "run", "llava", "--filter", "hallucination", "--chair-gt",
                 str(shared(*GT)), "--out", "clean", "--db", db]) == 0
    with Store(db, read_only=True) as store:
        rows = store.sql("SELECT action, reason FROM filter_log WHERE set_name = 'clean' "
                         "AND original LIKE '%passenger airplanes%'")
        mode = store.get_set("clean").options["object_mode"]
    assert mode == "corrected"
    assert [a for a, _ in rows] == ["keep"] and rows[0][1].startswith("modifier: passenger")
