"""``capaudit enrich --annotations`` (the oracle "detector") where the file lives (i5n): a
path or a URL (moto's S3 server on 127.0.0.1). The detector took it for a local path:
``s3://b/k.json`` was "s3:/b/k.json: no such annotations file". A URL is now read through
the storage layer (a private copy of the same name, once per worker): the tags and captions
are those of the same file on disk; a missing object is one line naming the URL, exit 2."""

from __future__ import annotations

import json

import pytest

from storage_servers import moto_endpoint, s3  # noqa: F401
from test_enrich_fixtures import make_dataset

CATEGORIES = [{"id": 1, "name": "dog"}, {"id": 2, "name": "kite"}, {"id": 3, "name": "bus"}]


def _instances(ids: list[int]) -> bytes:
    anns = [{"id": k, "image_id": iid, "category_id": 1 + (k + j) % 3, "bbox": [1, 2, 3, 4]}
            for k, iid in enumerate(ids) for j in range(2)]
    return json.dumps({"images": [{"id": i} for i in ids], "annotations": anns,
                       "categories": CATEGORIES}).encode()


@pytest.mark.parametrize("suffix", ["json", "jsonl"])
def test_the_detector_reads_a_url_as_the_local_file(suffix, tmp_path, s3):  # noqa: F811
    from capaudit.enrich.detectors.annotations import AnnotationDetector

    ids = [5, 7, 9]
    local = tmp_path / f"inst.{suffix}"
    local.write_bytes(_instances(ids) if suffix == "json" else "\n".join(
        json.dumps({"image_id": i, "categories": ["dog", "kite"][: 1 + i % 2]})
        for i in ids).encode())
    url = s3.put_file(f"in/inst.{suffix}", local)
    mine, remote = AnnotationDetector(str(local)), AnnotationDetector(url)
    assert remote.model_id == mine.model_id == f"annotations:inst.{suffix}"
    found = remote.detect([None] * 4, ids + [11])
    assert found == mine.detect([None] * 4, ids + [11]) and found[-1] == []
    assert all(found[:3])   # every image of the file has its categories
    assert AnnotationDetector(local.as_uri()).detect([None] * 4, ids + [11]) == found


def test_a_bad_remote_file_names_the_url(tmp_path, s3):  # noqa: F811
    from capaudit.enrich.detectors.annotations import AnnotationDetector
    from capaudit.errors import InputError

    url = s3.put("in/bad.json", b'{"annotations": [}')
    with pytest.raises(InputError) as exc:
        AnnotationDetector(url)
    assert str(exc.value).startswith(f"{url}: not a COCO instances file"), exc.value
    with pytest.raises(InputError) as exc:
        AnnotationDetector(s3.url("gone.json"))
    assert str(exc.value).startswith(f"{s3.url('gone.json')}: no such annotations file")


def _enrich(tmp_path, shards, db, url: str, annotations, out: str) -> int:
    from capaudit.cli.main import main

    return main([str(a) for a in ["enrich", "fusecap", "--shards", shards, "--out", out,
                                  "--llm", "openai", "--model", "m", "--base-url", url,
                                  "--annotations", annotations, "--work-dir",
                                  tmp_path / f"work-{out}", "--db", db]])


def test_enrich_with_annotations_on_s3_tags_as_the_local_file(tmp_path, s3, capsys):  # noqa: F811
    from capaudit.enrich.testing import FakeOpenAIServer
    from capaudit.store import Store

    db, shards, ids = make_dataset(tmp_path, n_images=3, shard_size=3, per_image=1)
    local = tmp_path / "inst.json"
    local.write_bytes(_instances(ids))
    url = s3.put_file("in/inst.json", local)
    with FakeOpenAIServer() as srv:
        assert _enrich(tmp_path, shards, db, srv.base_url, local, "here") == 0
        assert _enrich(tmp_path, shards, db, srv.base_url, url, "there") == 0
        assert _enrich(tmp_path, shards, db, srv.base_url, s3.url("gone.json"), "gone") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{s3.url('gone.json')}: no such annotations file" in err, err
    with Store(db, read_only=True) as st:
        got = {name: st.sql("SELECT image_id, caption, meta FROM captions WHERE set_id = ? "
                            "ORDER BY row_idx", [st.get_set(name).set_id])
               for name in ("here", "there")}
    assert [r[:2] for r in got["there"]] == [r[:2] for r in got["here"]]
    tags = [json.loads(r[2])["tags"] for r in got["there"]]
    assert tags == [json.loads(r[2])["tags"] for r in got["here"]] and all(tags)
