"""Readers people need (#12): Karpathy, Flickr tokens, ShareGPT messages, LLaVA turns and
--where, CapsFusion's real key, text-only records and the sniff hint; on the real files in
shared/data/real and on small files written in each published layout."""

from __future__ import annotations

import json

import pytest

from capaudit.errors import InputError
from capaudit.io.ingest import add_caption_set
from capaudit.io.readers import READERS, detect_format


def _rows(store, name):
    return store.sql("SELECT image_key, image_id, caption, c.namespace FROM captions c JOIN "
                     "caption_sets s USING (set_id) WHERE s.name = ? ORDER BY row_idx", [name])


def test_sharegpt_messages_real_file(store, shared):
    path = shared("data", "real", "llamafactory_mllm_demo.json")
    assert detect_format(path) == "sharegpt"
    recs = json.loads(path.read_text())
    answers = [[m["content"] for m in r["messages"] if m["role"] == "assistant"] for r in recs]
    add_caption_set(store, "first", path)
    assert [r[2] for r in _rows(store, "first")] == [a[0] for a in answers]
    add_caption_set(store, "all", path, turns="all")
    assert [r[2] for r in _rows(store, "all")] == [t for a in answers for t in a]
    add_caption_set(store, "join", path, turns="join")
    assert _rows(store, "join")[0][2] == "\n\n".join(answers[0])
    # "mllm_demo_data/1.jpg" is a numeric name under a folder of its own: not a COCO image
    assert _rows(store, "first")[0][3] == "path:mllm_demo_data"
    assert store.get_set("first").namespace == "path:mllm_demo_data"


def test_llava_qa_real_file_with_where(store, shared):
    path = shared("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
    assert detect_format(path) == "llava"
    recs = [json.loads(line) for line in path.open()]
    info = add_caption_set(store, "qa", path).info
    assert (info.n_captions, info.n_images, info.namespace) == (90, 30, "coco2014")
    info = add_caption_set(store, "detail", path, where="type = 'detail'").info
    detail = [r for r in recs if r["type"] == "detail"]
    assert info.n_captions == len(detail) == 30
    key, iid, cap, ns = _rows(store, "detail")[0]
    assert (key, cap, ns) == (detail[0]["image"], detail[0]["output"], "coco2014")
    assert iid == int(detail[0]["image"].rsplit("_", 1)[1].split(".")[0])
    # --where is a DuckDB SQL expression (#36.6): text values are quoted
    assert add_caption_set(store, "nd", path, where="type != 'detail' and type != 'conv'"
                           ).info.n_captions == sum(r["type"] == "complex" for r in recs)
    with pytest.raises(InputError, match="quote text values"):
        add_caption_set(store, "bad", path, where="type != detail")
    with pytest.raises(InputError, match="not a SQL expression"):
        add_caption_set(store, "bad", path, where="type = ")


def test_capsfusion_real_key_and_any_column(store, shared):
    path = shared("data", "real", "capsfusion_example_data.json")
    assert detect_format(path) == "capsfusion"
    recs = json.loads(path.read_text())
    add_caption_set(store, "fused", path)
    rows = _rows(store, "fused")
    assert len(rows) == 10000 and rows[0][2] == recs[0]["capsfuion_official"]
    assert rows[0][1] is None                          # LAION rows have no dataset id
    add_caption_set(store, "alt", path, caption_col="laion_2b")
    assert _rows(store, "alt")[9999][2] == recs[9999]["laion_2b"]
    with pytest.raises(InputError, match=r"no column 'capsfusion' \(columns: laion_2b, "
                                         r"laion_coco, capsfuion_official\)"):
        add_caption_set(store, "x", path, caption_col="capsfusion")


def test_karpathy_split_files(store, tmp_path):
    coco = {"images": [
        {"filepath": "val2014", "filename": "COCO_val2014_000000391895.jpg", "imgid": 0,
         "split": "test", "cocoid": 391895, "sentences": [
             {"tokens": ["a"], "raw": "A man with a red helmet on a small moped.", "sentid": 1},
             {"tokens": ["b"], "raw": "Man riding a motor bike on a dirt road.", "sentid": 2}]},
        {"filepath": "train2014", "filename": "COCO_train2014_000000057870.jpg", "imgid": 1,
         "split": "train", "cocoid": 57870,
         "sentences": [{"tokens": ["c"], "raw": "A restaurant with wooden tables.", "sentid": 3}]}],
        "dataset": "coco"}
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps(coco))
    assert detect_format(path) == "karpathy"
    add_caption_set(store, "test", path, split="test")
    assert _rows(store, "test") == [
        ("391895", 391895, "A man with a red helmet on a small moped.", "coco2014"),
        ("391895", 391895, "Man riding a motor bike on a dirt road.", "coco2014")]
    flickr = {"images": [{"filename": "1000092795.jpg", "split": "train", "imgid": 0,
                          "sentences": [{"raw": "Two young guys with shaggy hair."}]}],
              "dataset": "flickr30k"}
    path = tmp_path / "dataset_flickr30k.json"
    path.write_text(json.dumps(flickr))
    add_caption_set(store, "f30k", path)
    assert _rows(store, "f30k") == [("1000092795", 1000092795, "Two young guys with shaggy hair.",
                                     "flickr30k")]
    with pytest.raises(InputError, match="unknown --split 'dev'"):
        add_caption_set(store, "bad", path, split="dev")


def test_flickr_token_files(store, tmp_path):
    path = tmp_path / "results_20130124.token"
    path.write_text("1000092795.jpg#0\tTwo young guys with shaggy hair .\n"
                    "1000092795.jpg#1\tTwo young , White males are outside .\n")
    assert detect_format(path) == "flickr-token"
    info = add_caption_set(store, "f30k", path).info
    assert (info.n_captions, info.n_images, info.namespace) == (2, 1, "flickr30k")
    assert _rows(store, "f30k")[1][2] == "Two young , White males are outside ."
    p8 = tmp_path / "Flickr8k.token.txt"
    p8.write_text("1000268201_693b08cb0e.jpg#0\tA child in a pink dress .\n")
    info = add_caption_set(store, "f8k", p8).info
    assert _rows(store, "f8k") == [("1000268201_693b08cb0e.jpg", None,
                                    "A child in a pink dress .", "flickr8k")]
    bad = tmp_path / "bad.token"
    bad.write_text("1000092795.jpg#0\tok\nno tab here\n")
    with pytest.raises(InputError, match=r"bad.token, row 2: line is not"):
        add_caption_set(store, "bad", bad, fmt="flickr-token")


def test_text_only_records_refused_by_row_or_counted(store, tmp_path):
    recs = [{"id": "1000", "conversations": [{"from": "human", "value": "Which is a compound?"},
                                             {"from": "gpt", "value": "Water."}]},
            {"id": "1001", "image": "1001/image.png", "conversations": [
                {"from": "human", "value": "<image>\nWhat is shown?"},
                {"from": "gpt", "value": "A map."}]}]
    path = tmp_path / "scienceqa.json"
    path.write_text(json.dumps(recs))
    with pytest.raises(InputError, match=r"scienceqa.json, row 1: record has no image"):
        add_caption_set(store, "sqa", path)
    info = add_caption_set(store, "sqa", path, skip_no_image=True).info
    assert info.n_captions == 1 and info.meta["skipped_no_image"] == 1
    # the record id "1001" is never taken for an image id
    assert _rows(store, "sqa") == [("1001/image.png", None, "A map.", None)]


def test_sniff_failure_lists_what_each_format_wants(tmp_path):
    path = tmp_path / "mystery.json"
    path.write_text(json.dumps([1, 2]))   # a list of records is read (json); of numbers, not
    with pytest.raises(InputError) as err:
        detect_format(path)
    msg = str(err.value)
    assert "sharegpt (wants records with 'messages'" in msg
    assert "capsfusion (wants records with 'laion_coco'" in msg
    suggested = msg.split("one of: ", 1)[1].rstrip(")").split(", ")
    assert suggested and set(suggested) <= set(READERS.names())
    assert "coco-results (wants a JSON list of" in msg and "coco-results" in suggested
