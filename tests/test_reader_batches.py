"""Reader batches are bounded by caption text, not only by rows (issue #13, memory).

A batch is what a consumer holds as Python objects at once (the streaming
audit converts each batch to lists), so 200k-row batches of ShareGPT4V-length
captions would cost about 1 GB. These tests read real OSCAR captions and
long ones with a small ``batch_bytes`` and check the bound and that the
rows come out complete and in file order.
"""

from __future__ import annotations

import json

from capaudit.io.readers import detect_format, get_reader

LIMIT = 4096  # bytes of caption text per batch in these tests


def _read(path, **options):
    reader = get_reader(detect_format(path), batch_bytes=LIMIT, **options)
    return list(reader.read(path))


def _check(batches, captions):
    sizes = [sum(len(c.encode()) for c in b.column("caption").to_pylist()) for b in batches]
    longest = max(len(c.encode()) for c in captions)
    assert len(batches) > 1
    # a batch stops once it reaches the limit: at most the limit plus one caption
    assert max(sizes) <= LIMIT + longest, (max(sizes), LIMIT + longest)
    assert [c for b in batches for c in b.column("caption").to_pylist()] == captions


def test_jsonl_batches_bounded_by_bytes(shared, tmp_path):
    lines = shared("data", "captioners", "oscar_val2014_all.jsonl").read_text().splitlines()[:2000]
    path = tmp_path / "oscar.jsonl"
    path.write_text("\n".join(lines) + "\n")
    caps = [json.loads(line)["caption"] for line in lines]
    _check(_read(path), caps)


def test_jsonl_longer_rows_than_sampled_are_sliced(tmp_path):
    # the batch size is chosen from the first rows' mean length; later rows 100x longer
    # still come in batches of about LIMIT bytes (zero-copy slices)
    caps = [f"a cat {i}." for i in range(3000)] + [("a dog on a sofa. " * 60) + str(i)
                                                    for i in range(300)]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n"
                            for i, c in enumerate(caps)))
    _check(_read(path), caps)


def test_record_reader_batches_bounded_by_bytes(tmp_path):
    caps = [("A long description of a kitchen with a stove. " * 20) + str(i) for i in range(200)]
    recs = [{"id": str(i), "image": f"coco/train2017/{i:012d}.jpg",
             "conversations": [{"from": "human", "value": "<image>\nDescribe."},
                               {"from": "gpt", "value": c}]} for i, c in enumerate(caps)]
    path = tmp_path / "sharegpt4v.json"
    path.write_text(json.dumps(recs))
    _check(_read(path), caps)
