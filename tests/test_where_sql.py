"""``--where`` is one DuckDB SQL expression over a record's fields, for every record format
(#36.6): JSONL, CSV/TSV, parquet, JSON lists, LLaVA/ShareGPT4V conversations and Karpathy's
image entries; anything but an expression is refused before a file is read."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.errors import InputError
from capaudit.io.ingest import add_caption_set
from capaudit.store.where import checked_where

# a VQA benchmark's answers beside their images: detail descriptions among short answers
ANSWERS = [{"question_id": 0, "image": "COCO_val2014_000000391895.jpg",
            "prompt": "Describe this photo in detail.", "text": "A man rides a dirt bike."},
           {"question_id": 1, "image": "COCO_val2014_000000391895.jpg",
            "prompt": "What color is the bike?", "text": "Red."},
           {"question_id": 2, "image": "COCO_val2014_000000522418.jpg",
            "prompt": "Describe this photo in detail.", "text": "A woman cuts a cake."},
           {"question_id": 3, "image": "COCO_val2014_000000184613.jpg",
            "prompt": "How many cows?", "text": "Two."}]
DETAIL = "prompt = 'Describe this photo in detail.'"


def _kept(store, name: str) -> list:
    """(source record, caption) of each stored caption."""
    rows = store.sql("SELECT meta, caption FROM captions WHERE set_id = (SELECT set_id FROM "
                     "caption_sets WHERE name = ?) ORDER BY row_idx", [name])
    return [(json.loads(m)["src"], c) for m, c in rows]


def _write(tmp_path, fmt: str):
    path = tmp_path / f"answers.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in ANSWERS))
    elif fmt == "json":
        path.write_text(json.dumps(ANSWERS))
    elif fmt == "csv":
        path.write_text("question_id,image,prompt,text\n" + "".join(
            f'{r["question_id"]},{r["image"]},"{r["prompt"]}","{r["text"]}"\n' for r in ANSWERS))
    else:
        pq.write_table(pa.Table.from_pylist(ANSWERS), path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet"])
def test_where_on_flat_files_keeps_records_and_their_place(store, tmp_path, fmt):
    # before: "--where does not apply to jsonl files"
    path = _write(tmp_path, fmt)
    info = add_caption_set(store, "d", path, where=DETAIL).info
    assert _kept(store, "d") == [(0, "A man rides a dirt bike."), (2, "A woman cuts a cake.")]
    assert (info.n_captions, info.n_images) == (2, 2)
    # a typed comparison: numbers compare as numbers (CSV too)
    add_caption_set(store, "late", path, where="question_id >= 2 AND text LIKE '%cake%'")
    assert _kept(store, "late") == [(2, "A woman cuts a cake.")]


def test_where_without_id_column_keys_by_source_record(store, tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps({"kind": k, "caption": c}) + "\n" for k, c in
                            [("a", "a dog"), ("b", "a cat"), ("a", "a cow")]))
    add_caption_set(store, "a", path, where="kind = 'a'")
    assert store.sql("SELECT image_key, caption FROM captions ORDER BY row_idx") == [
        ("0", "a dog"), ("2", "a cow")]


def test_where_on_conversations_and_real_file(store, shared):
    path = shared("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
    recs = json.loads(path.read_text())
    dog = [i for i, r in enumerate(recs) if "dog" in r["conversations"][1]["value"]]
    info = add_caption_set(store, "dogs", path,
                           where="conversations[2].value LIKE '%dog%'").info
    assert info.n_captions == len(dog) > 0
    assert [s for s, _ in _kept(store, "dogs")] == dog


def test_where_on_karpathy_image_entries(store, tmp_path):
    doc = {"dataset": "coco", "images": [
        {"filename": "a.jpg", "cocoid": 1, "split": "val", "sentences": [{"raw": "a dog"}]},
        {"filename": "b.jpg", "cocoid": 2, "split": "test", "sentences": [{"raw": "a cat"}]},
        {"filename": "c.jpg", "cocoid": 3, "split": "val", "sentences": [{"raw": "a cow"}]}]}
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps(doc))
    add_caption_set(store, "k", path, where="cocoid <> 1 AND split = 'val'")
    assert store.sql("SELECT image_id, caption FROM captions") == [(3, "a cow")]


@pytest.mark.parametrize("expr,says", [
    ("1=1; DROP TABLE captions", "not a SQL expression"),
    ("question_id IN (SELECT 1)", "may not hold a subquery"),
    ("question_id < 2) UNION (SELECT * FROM read_text('/etc/passwd')", "one expression"),
    ("prompt = Describe this", "not a SQL expression"),
    ("", "is empty")])
def test_anything_but_an_expression_is_refused(expr, says):
    with pytest.raises(InputError, match=says):
        checked_where(expr)


def test_unknown_field_names_the_fix_before_anything_is_stored(store, tmp_path):
    path = _write(tmp_path, "jsonl")
    with pytest.raises(InputError) as err:
        add_caption_set(store, "x", path, where="prompt = detail")
    assert "quote text values" in str(err.value)
    assert store.sql("SELECT count(*) FROM caption_sets") == [(0,)]


def test_where_filtered_set_exports_its_source_untouched(store, tmp_path):
    from capaudit.io.export import export_set

    path = _write(tmp_path, "jsonl")
    add_caption_set(store, "d", path, where=DETAIL)
    out = export_set(store, "d", "original", tmp_path / "back.jsonl")
    assert out.read_bytes() == path.read_bytes()
