"""The reference CHAIR port used by ``benchmarks/bench_vs_reference.py`` is faithful.

A benchmark against a port that computes something else would time the wrong work, so the
port must give the reference's word lists (Maxlinn's published example output) and the same
CHAIR_s / CHAIR_i as capaudit's reference mode on real model captions.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import REPO, shared_path

pytest.importorskip("nltk")
pytest.importorskip("textblob")
sys.path.insert(0, str(REPO / "benchmarks"))
import reference_chair  # noqa: E402


@pytest.fixture(scope="module")
def port():
    return reference_chair.CHAIR(
        shared_path("data", "coco2014", "chair_objects_trainval2014.jsonl"))


def test_word_lists_equal_the_published_reference_output(port):
    ref = json.loads(shared_path("references", "chair_maxlinn_example",
                                 "reference_outputs.json").read_text())
    for s in ref["sentences"]:
        words, nodes, idxs, raw = port.caption_to_words(s["caption"])
        assert raw == s["words"]
        assert nodes == s["mscoco_generated_words"]
        assert set(port.imid_to_objects[s["image_id"]]) == set(s["mscoco_gt_words"])
        assert [i for (w, n), i in zip(zip(words, nodes), idxs)
                if n not in port.imid_to_objects[s["image_id"]]] == s["hallucination_idxs"]


def test_chair_equals_capaudit_on_nic_captions(port):
    """nic hallucinates most (CHAIR_s 36%): 500 of its captions, both tools, same counts."""
    from capaudit.audit.engine import audit_captions
    from capaudit.io.annotation_files import Annotations

    ids, caps = reference_chair.read_captions(
        shared_path("data", "captioners", "nic_val2014_gender.jsonl"))
    ids, caps = ids[:500], caps[:500]
    out = port.compute_chair_lists(ids, caps)
    ref = {k: 100 * out["overall_metrics"][m] for k, m in (("chair_s", "CHAIRs"),
                                                            ("chair_i", "CHAIRi"))}
    ann = Annotations(chair_gt={i: frozenset(v) for i, v in port.imid_to_objects.items()})
    ours = audit_captions(ids, caps, ann, metrics=["chair_s", "chair_i"], n_boot=0, workers=1)
    assert 20 < ref["chair_s"] < 50  # the slice does hallucinate: the comparison can fail
    assert ours.results["chair_s"].value == pytest.approx(ref["chair_s"], rel=1e-12)
    assert ours.results["chair_i"].value == pytest.approx(ref["chair_i"], rel=1e-12)
    n_hall = sum(bool(s["mscoco_hallucinated_words"]) for s in out["sentences"])
    assert ref["chair_s"] == pytest.approx(100 * n_hall / 500)
    # the reference's per-caption record, as chair.py writes it (Recall included)
    s = out["sentences"][0]
    assert set(s) == {"image_id", "caption", "mscoco_hallucinated_words", "mscoco_gt_words",
                      "mscoco_generated_words", "hallucination_idxs", "words", "metrics"}
    assert set(s["metrics"]) == {"CHAIRs", "CHAIRi", "Recall"}


def test_case_variants_are_distinct_and_lowercase_equal():
    caps = [reference_chair.case_variant("a dog on a bench", k) for k in range(32)]
    assert len(set(caps)) == 32
    assert {c.lower() for c in caps} == {"a dog on a bench"}
    assert caps[0] == "a dog on a bench" and caps[1] == "A dog on a bench"
    assert caps[6] == "a DOg on a bench"  # bits 1 and 2: the 2nd and 3rd letters


@pytest.mark.slow
def test_port_gives_the_shared_reference_values_on_oscar(port):
    """All 40,504 oscar captions (~30 s): the reference values of the shared file."""
    want = json.loads(shared_path("references", "reference_metrics_visible.json").read_text())
    want = want["reference_values"]["oscar_val2014_all"]
    out = port.compute_chair(str(shared_path("data", "captioners", "oscar_val2014_all.jsonl")))
    m = out["overall_metrics"]
    assert (len(out["sentences"]), round(100 * m["CHAIRs"], 3), round(100 * m["CHAIRi"], 3)) \
        == (want["n"], want["chair_s"], want["chair_i"])


@pytest.mark.slow
def test_port_runs_as_the_reference_script(tmp_path):
    """As ``chair.py --cache chair.pkl`` is run: the first run builds and pickles the
    evaluator, the next loads it; both print the same values, which are the hand count of
    the per-caption records the port saves (``--save_path``, the reference's output JSON)."""
    import subprocess

    src = shared_path("data", "captioners", "nic_val2014_gender.jsonl")
    head = tmp_path / "nic300.jsonl"
    head.write_text("".join(line for _, line in zip(range(300), src.open())))
    gt = shared_path("data", "coco2014", "chair_objects_trainval2014.jsonl")
    cmd = [sys.executable, str(REPO / "benchmarks" / "reference_chair.py"), str(head),
           "--chair-gt", str(gt), "--cache", str(tmp_path / "chair.pkl")]
    first = subprocess.run(cmd + ["--save_path", str(tmp_path / "out.json")], capture_output=True,
                           text=True, check=True, env={**__import__("os").environ,
                                                       "PYTHONPATH": str(REPO / "src")})
    assert (tmp_path / "chair.pkl").exists()
    second = subprocess.run(cmd, capture_output=True, text=True, check=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    a, b = (json.loads(p.stdout.splitlines()[-1]) for p in (first, second))
    assert (a["n"], a["chair_s"], a["chair_i"]) == (b["n"], b["chair_s"], b["chair_i"]) and \
        a["n"] == 300
    saved = json.loads((tmp_path / "out.json").read_text())
    hall = sum(s["metrics"]["CHAIRs"] for s in saved["sentences"])
    words = sum(len(s["mscoco_generated_words"]) for s in saved["sentences"])
    bad = sum(len(s["mscoco_hallucinated_words"]) for s in saved["sentences"])
    assert a["chair_s"] == round(100 * hall / 300, 3) and a["chair_i"] == round(100 * bad / words, 3)
    assert "CHAIRs" in first.stderr and "Recall" in first.stderr    # print_metrics, as chair.py
