"""``annotations detect``: detector evidence stored as an instance source, resumable, usable
as ``--instances NAME`` (scikit-image photos keyed to made-up ids, hand-written content)."""

from __future__ import annotations

import io

import pytest



def _shard(tmp_path):
    from PIL import Image

    pytest.importorskip("ai_edge_litert")
    skdata = pytest.importorskip("skimage.data")
    from capaudit.io.image_shards import Sample, write_shard

    samples = []
    for iid, photo in ((901, "astronaut"), (902, "chelsea"), (903, "coffee")):
        buf = io.BytesIO()
        Image.fromarray(getattr(skdata, photo)()).convert("RGB").save(buf, "JPEG")
        samples.append(Sample(f"{iid:09d}", iid, buf.getvalue(), "jpg", [f"photo {photo}"]))
    folder = tmp_path / "shards"
    folder.mkdir()
    write_shard(folder, "00000.tar", samples, "x")
    return folder


@pytest.mark.slow
def test_detections_become_instances_and_resume(tmp_path, store):
    from capaudit.enrich.detect_annotations import run_detect_annotations
    from capaudit.io.annotation_store import resolve_annotations

    folder = _shard(tmp_path)
    seen = []
    name, n, prov = run_detect_annotations(store, str(folder), "ssd", min_score=0.5,
                                           work_dir=tmp_path / "w", on_shard=seen.append)
    assert n == 3 and prov["weights_sha256"] and prov["min_score"] == 0.5
    inst = resolve_annotations(store, instances=None).instances
    # hand-written content: the astronaut photo shows a person, chelsea a cat, coffee a cup
    assert "person" in inst[901] and "cat" in inst[902] and "cup" in inst[903]
    run_detect_annotations(store, str(folder), "ssd", min_score=0.5, work_dir=tmp_path / "w",
                           on_shard=seen.append)
    assert [s["status"] for s in seen] == ["done", "resumed"]


def test_instances_by_stored_name_or_a_clear_error(tmp_path, store):
    from capaudit.errors import InputError
    from capaudit.io.annotation_store import add_annotations, resolve_annotations

    f = tmp_path / "det.jsonl"
    f.write_text('{"image_id": 5, "categories": ["dog"]}\n')
    add_annotations(store, "instances", f, "detected")
    assert resolve_annotations(store, instances="detected").instances == {5: frozenset({"dog"})}
    with pytest.raises(InputError, match="no instances file or stored source named 'nope'"):
        resolve_annotations(store, instances="nope")
