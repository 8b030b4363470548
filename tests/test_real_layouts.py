"""Captioner outputs everyone has (#36.1-2, #34.8): the COCO results layout, records whose
fields have other names, and answers files, in small files written in each real layout
(coco-caption / LAVIS results, a captioner's predictions beside its references, ImageInWords'
``image/key`` records, LLaVA-Bench answers, ScienceQA read with ``--skip-no-image``) and the
shared real files."""

from __future__ import annotations

import json

import pytest

from capaudit.errors import InputError
from capaudit.io.ingest import add_caption_set
from capaudit.io.readers import detect_format
from test_hostile import cli, one_line_error

# coco-caption's evaluation and LAVIS write their results with json.dump(results, f)
RESULTS = [{"image_id": 391895, "caption": "a man riding a motorcycle on a dirt road"},
           {"image_id": 522418, "caption": "a woman cutting a large cake with a knife"},
           {"image_id": 184613, "caption": "a boy holding an umbrella next to a cow"}]


def _rows(store, name: str, cols: str = "image_key, image_id, caption, namespace") -> list:
    return store.sql(f"SELECT {cols} FROM captions WHERE set_id = "
                     f"(SELECT set_id FROM caption_sets WHERE name = ?) ORDER BY row_idx", [name])


def test_coco_results_are_sniffed_read_and_written_back_byte_identical(store, tmp_path):
    src = tmp_path / "captions_val2014_results.json"
    src.write_text(json.dumps(RESULTS))
    assert detect_format(src) == "coco-results"   # before: "cannot tell the caption format"
    info = add_caption_set(store, "res", src).info
    assert (info.format, info.n_captions, info.n_images) == ("coco-results", 3, 3)
    # integer ids are COCO-family ids; the layout names no dataset (nocaps shares it)
    assert _rows(store, "res") == [("391895", 391895, RESULTS[0]["caption"], None),
                                   ("522418", 522418, RESULTS[1]["caption"], None),
                                   ("184613", 184613, RESULTS[2]["caption"], None)]
    # each caption's source place, for the JSON-list writer of --to original
    assert [json.loads(m) for (m,) in _rows(store, "res", "meta")] == [
        {"src": 0}, {"src": 1}, {"src": 2}]
    from capaudit.io.export import export_set

    out = export_set(store, "res", "original", tmp_path / "back.json")
    assert out.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("bad,shown", [(3.0, "3.0"), (True, "True"), (-7, "-7")])
def test_coco_results_id_that_is_no_integer_is_refused_by_row(tmp_path, capsys, bad, shown):
    src = tmp_path / "results.json"
    src.write_text(json.dumps([RESULTS[0], {"image_id": bad, "caption": "a dog"}]))
    code, _, err = cli(["sets", "add", "r", src, "--db", tmp_path / "r.duckdb"], capsys)
    line = one_line_error(err)
    assert code == 2 and "row 2" in line and f"image_id {shown} is not an integer" in line


def test_coco_results_of_a_real_captioner_audit_like_its_jsonl(store, shared, tmp_path):
    """The same captions as a COCO results array and as the captioner's JSONL: same rows."""
    lines = shared("data", "captioners", "nic_val2014_gender.jsonl")
    recs = [json.loads(x) for x in lines.open()]
    src = tmp_path / "nic_results.json"
    src.write_text(json.dumps([{"image_id": r["image_id"], "caption": r["caption"]}
                               for r in recs]))
    a = add_caption_set(store, "array", src).info
    b = add_caption_set(store, "lines", lines).info
    assert (a.format, a.n_captions, a.n_images) == ("coco-results", len(recs),
                                                    len({r["image_id"] for r in recs}))
    assert (b.n_captions, b.n_images) == (a.n_captions, a.n_images)
    cols = "image_id, caption"
    assert _rows(store, "array", cols) == _rows(store, "lines", cols)


PREDICTIONS = [{"split": "val", "image_name": "COCO_val2014_000000391895.jpg",
                "captions": ["A man rides a bike.", "A man on a dirt bike.", "a biker", "x", "y"],
                "prediction": "a man riding a motorcycle"},
               {"split": "val", "image_name": "COCO_val2014_000000522418.jpg",
                "captions": ["A woman cuts cake.", "cake", "a knife", "x", "y"],
                "prediction": "a woman with a cake"}]


def test_predictions_beside_references_one_try_names_the_fields(store, tmp_path, capsys):
    src = tmp_path / "predictions.json"
    src.write_text(json.dumps(PREDICTIONS, indent=2))
    code, _, err = cli(["sets", "add", "p", src, "--db", tmp_path / "p.duckdb"], capsys)
    line = one_line_error(err)
    # before: "record has no 'caption' column (fix: pass --caption-col)", three tries
    assert code == 2 and "columns: split, image_name, captions, prediction" in line
    assert "--caption-col prediction --id-col image_name" in line
    info = add_caption_set(store, "p", src, caption_col="prediction").info
    # image_name is a file-name field: COCO names map to ids as in every reader
    assert _rows(store, "p") == [("COCO_val2014_000000391895.jpg", 391895,
                                  "a man riding a motorcycle", "coco2014"),
                                 ("COCO_val2014_000000522418.jpg", 522418,
                                  "a woman with a cake", "coco2014")]
    assert info.format == "json"
    from capaudit.io.export import export_set

    assert export_set(store, "p", "original", tmp_path / "b.json").read_bytes() == \
        src.read_bytes()


def test_id_field_of_another_name_is_never_replaced_by_row_numbers(store, tmp_path):
    # ImageInWords' records: the id is "image/key", the description "IIW"
    src = tmp_path / "iiw.jsonl"
    rows = [{"image/key": "0801961485534636", "IIW": "A red car parked in front of a wall."},
            {"image/key": "0a1b2c3d4e5f6071", "IIW": "Two dogs run on a sandy beach."}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError) as err:
        add_caption_set(store, "iiw", src, caption_col="IIW")
    text = str(err.value)
    assert "'image/key'" in text and "--id-col image/key" in text
    info = add_caption_set(store, "iiw", src, caption_col="IIW", id_col="image/key").info
    # a key with a leading zero or a hex digit stays text (#36.4): two images, no ids
    assert _rows(store, "iiw", "image_key, image_id") == [("0801961485534636", None),
                                                          ("0a1b2c3d4e5f6071", None)]
    assert info.n_images == 2


def test_headerless_tsv_hint_names_caption_and_url_columns(store, tmp_path):
    src = tmp_path / "Validation_GCC-1.1.0-Validation.tsv"
    src.write_text("a dog runs on the beach\thttp://example.org/uploads/2017/04/139.jpg\n"
                   "the kitchen of a flat\thttps://media.example.com/photos/k-5132.jpg\n")
    with pytest.raises(InputError) as err:
        add_caption_set(store, "gcc", src)
    assert "--caption-col column0 --id-col column1" in str(err.value)


# LLaVA-Bench's answer file (model answers to qa90's questions): question ids, no image
ANSWERS = [{"question_id": i, "prompt": p, "text": t, "answer_id": f"a{i}", "model_id": "m",
            "metadata": {}} for i, (p, t) in enumerate(
    [("Describe this photo in detail.", "A street with two cars and a man on a bike."),
     ("What color is the car?", "Red."),
     ("Describe this photo in detail.", "A kitchen with a stove, a sink and a cat.")])]


def test_answers_file_refused_and_its_fix_does_not_lead_back(tmp_path, capsys, shared):
    src = tmp_path / "answer-file-llava.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ANSWERS))
    db = tmp_path / "a.duckdb"
    chair = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    assert cli(["annotations", "add", "chair-gt", chair, "--db", db], capsys)[0] == 0
    code, _, err = cli(["sets", "add", "qa", src, "--db", db], capsys)
    line = one_line_error(err)   # before: 3 captions of 3 "images" numbered by row
    assert code == 2 and "an answers file" in line and "'question_id'" in line
    assert "--id-col question_id --namespace NAME" in line
    # the fix it names, followed: read, and the audit says why CHAIR is not computed
    code, out, _ = cli(["sets", "add", "qa", src, "--id-col", "question_id", "--namespace",
                        "llava-bench", "--db", db], capsys)
    assert code == 0 and "ids: llava-bench" in out
    code, out, err = cli(["audit", "run", "qa", "--metrics", "chair_s,length", "--db", db],
                         capsys)
    assert code == 0, err
    assert "CHAIR_s not computed" in " ".join(out.split()) and "llava-bench" in out


def test_one_letter_answers_read_with_a_warning_giving_the_counts(store, tmp_path, capsys):
    # ScienceQA in LLaVA's layout: 4 text-only questions, 8 with an image answered "A"/"B"
    recs = []
    for i in range(12):
        rec = {"id": f"q{i}", "conversations": [
            {"from": "human", "value": "<image>\nWhich is a mammal?\nA. fish\nB. dog"},
            {"from": "gpt", "value": "AB"[i % 2]}]}
        if i % 3:
            rec["image"] = f"scienceqa/{i}/image.png"
        recs.append(rec)
    src = tmp_path / "scienceqa_llava.json"
    src.write_text(json.dumps(recs))
    code, out, err = cli(["sets", "add", "sqa", src, "--skip-no-image", "--db",
                          tmp_path / "s.duckdb"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "skipped 4 records without an image" in text
    assert "8 of 8 captions are one or two words, 8 a lone multiple-choice letter" in text
    code, out, _ = cli(["sets", "show", "sqa", "--db", tmp_path / "s.duckdb"], capsys)
    assert "8 of 8 captions are one or two words" in " ".join(out.split())


def test_real_captions_carry_no_answers_warning(store, shared):
    info = add_caption_set(store, "llava", shared("data", "real",
                                                  "llava_coco2014_val_gpt4_qa_30x3.jsonl")).info
    assert "answers_like" not in (info.meta or {})


def test_short_answers_warn_only_past_a_handful(store, tmp_path):
    def add(name, caps):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"image_id": i + 1, "caption": c}) + "\n"
                                for i, c in enumerate(caps)))
        return (add_caption_set(store, name, path).info.meta or {}).get("answers_like")
    assert add("few", ["a man", "two dogs", "a cat"]) is None           # 3 captions: no evidence
    assert add("many", ["Red.", "Two.", "Yes."] * 7) == {"captions": 21, "short": 21,
                                                         "letters": 0}
    assert add("letters", ["A", "(B)", "c."]) == {"captions": 3, "short": 3, "letters": 3}
