"""JSON arrays are streamed record by record (#36.7) and webdataset exports carry ``.txt``
(#36.8); tar members of one name and compressed records past the size limit are named
(#33.11). Memory is measured by ``benchmarks/bench_memory.py --json-array``, not here."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from capaudit.errors import InputError
from capaudit.io.ingest import add_caption_set


def _conv(i: int, image: str | None = "coco/train2017/000000000009.jpg") -> dict:
    rec = {"id": str(i), "conversations": [{"from": "human", "value": "<image>\nDescribe."},
                                           {"from": "gpt", "value": f"a dog number {i}"}]}
    if image:
        rec["image"] = image
    return rec


@pytest.fixture
def no_whole_reads(monkeypatch):
    """Reading a top-level array whole is what #36.7 removed: every reader module's binding
    of the whole-document loader fails loudly, but those of the readers of one JSON object
    (COCO captions, Karpathy), which have no array to stream."""
    import sys

    from capaudit.io.readers import READERS

    for name in READERS.names():
        READERS.get(name)                      # every reader module imported
    for mod in [m for n, m in sys.modules.items() if n.startswith("capaudit.io.readers")]:
        if hasattr(mod, "load_json_document") and not mod.__name__.endswith(("coco", "karpathy")):
            monkeypatch.setattr(mod, "load_json_document", _whole)


def _whole(path):
    raise AssertionError(f"{path} was read whole")


@pytest.mark.parametrize("fmt,records", [
    ("sharegpt4v", [_conv(i) for i in range(5)]),
    ("coco-results", [{"image_id": i + 1, "caption": f"a cat number {i}"} for i in range(5)]),
    ("json", [{"file_name": f"{i + 1}.jpg", "text": f"a cow number {i}"} for i in range(5)]),
    ("fusecap", [{"image": f"{i + 1}.jpg", "caption": f"a hen number {i}"} for i in range(5)]),
    ("sharegpt", [{"messages": [{"role": "user", "content": "<image>Describe."},
                                {"role": "assistant", "content": f"a pig number {i}"}],
                   "images": [f"{i + 1}.jpg"]} for i in range(5)])])
def test_every_json_array_reader_streams(store, tmp_path, no_whole_reads, fmt, records):
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records, indent=1))
    info = add_caption_set(store, "s", path, fmt).info
    assert info.n_captions == 5
    caps = [c for (c,) in store.sql("SELECT caption FROM captions ORDER BY row_idx")]
    assert caps[0].endswith("number 0") and caps[4].endswith("number 4")


def test_real_sharegpt4v_array_streams_with_every_caption(store, shared, no_whole_reads):
    path = shared("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
    info = add_caption_set(store, "s4v", path).info
    assert (info.format, info.n_captions) == ("sharegpt4v", 890)


def test_per_row_errors_name_the_record_as_before(store, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps([_conv(0), _conv(1), _conv(2, image=None)]))
    with pytest.raises(InputError, match=r"row 3: record has no image"):
        add_caption_set(store, "s", path)
    path.write_text(json.dumps([_conv(0), _conv(1)])[:-40])      # cut short
    with pytest.raises(InputError, match=r"ends early, in record 2"):
        add_caption_set(store, "s", path)
    assert store.sql("SELECT count(*) FROM captions") == [(0,)]


def _members(folder) -> dict[str, dict[str, bytes]]:
    """Samples grouped by key as webdataset's tariterators do (the name up to its first
    dot), over every shard in order."""
    samples: dict[str, dict[str, bytes]] = {}
    for shard in sorted(folder.glob("*.tar")):
        with tarfile.open(shard) as tf:
            for m in tf:
                key, ext = m.name.split(".", 1)
                samples.setdefault(key, {})[ext] = tf.extractfile(m).read()
    return samples


def test_webdataset_export_writes_one_txt_per_caption(store, shared, tmp_path):
    from capaudit.io.export import export_with_provenance

    src = shared("data", "coco2014", "captions_val2014_subset.json")
    doc = json.loads(src.read_text())
    add_caption_set(store, "coco", src)
    out = export_with_provenance(store, "coco", "webdataset", tmp_path / "wd")
    samples = _members(out)
    # every caption is one sample whose .txt a trainer reads (before: no .txt at all)
    assert len(samples) == len(doc["annotations"]) == 24019
    assert all(set(s) == {"txt", "json"} for s in samples.values())
    by_image: dict[int, list[str]] = {}
    for a in doc["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a["caption"])
    first = doc["annotations"][0]["image_id"]
    texts = [samples[f"{first}_c{j}"]["txt"].decode() for j in range(len(by_image[first]))]
    assert texts == by_image[first]
    meta = json.loads(samples[f"{first}_c0"]["json"])
    assert meta == {"image_id": first, "key": str(first), "caption_index": 0,
                    "n_captions": len(by_image[first]), "namespace": "coco2014"}
    assert "KEY.txt" in json.loads((out / "provenance.json").read_text())["config"]["layout"]
    back = add_caption_set(store, "back", out).info       # read back: same ids and captions
    assert (back.n_captions, back.n_images, back.namespace) == (24019, 4800, "coco2014")


def _tar(path, members) -> None:
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_tar_with_two_members_of_one_name_is_refused(store, tmp_path):
    # before: the second 000001.txt silently replaced the first
    _tar(tmp_path / "00000.tar", [("000001.txt", b"a dog"), ("000001.txt", b"a cat")])
    with pytest.raises(InputError, match="member '000001.txt' appears twice"):
        add_caption_set(store, "t", tmp_path / "00000.tar")


def test_gzip_bomb_is_too_large_not_malformed(store, tmp_path):
    path = tmp_path / "captions.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as gz:
        gz.write(b'{"image_id": 1, "caption": "a dog"}\n{"image_id": 2, "caption": "')
        for _ in range(3):                     # 48 MB of one caption, ~50 KB on disk
            gz.write(b"a" * (16 << 20))
        gz.write(b'"}\n')
    assert path.stat().st_size < 1 << 20
    with pytest.raises(InputError) as err:
        add_caption_set(store, "g", path, "jsonl")
    text = str(err.value)  # before: "row 1: not valid UTF-8"
    assert "larger than 16 MB once decompressed" in text and "UTF-8" not in text
