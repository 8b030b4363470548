"""A file that holds no captions is not read as captions (#46.4): a POPE question file (yes/no
questions with a label), a benchmark's question file, a file of prompts. Files written in
the layouts those projects publish (POPE's ``coco_pope_random.json`` is JSONL of
``{"question_id", "image", "text", "label"}``; LLaVA-Bench's ``questions.jsonl`` of
``{"image", "text", "category", "question_id"}``)."""

from __future__ import annotations

import json

import pytest

from capaudit.errors import InputError
from capaudit.io.ingest import add_caption_set

# POPE's first lines (coco_pope_random.json), as the POPE repository ships them
POPE = [
    {"question_id": 1, "image": "COCO_val2014_000000310196.jpg",
     "text": "Is there a snowboard in the image?", "label": "yes"},
    {"question_id": 2, "image": "COCO_val2014_000000310196.jpg",
     "text": "Is there a bench in the image?", "label": "no"},
    {"question_id": 3, "image": "COCO_val2014_000000210789.jpg",
     "text": "Is there a dining table in the image?", "label": "yes"},
    {"question_id": 4, "image": "COCO_val2014_000000210789.jpg",
     "text": "Is there a motorcycle in the image?", "label": "no"},
]


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_pope_questions_are_refused_naming_the_fix(store, tmp_path):
    path = _write_jsonl(tmp_path / "coco_pope_random.jsonl", POPE * 10)
    with pytest.raises(InputError) as err:
        add_caption_set(store, "pope", path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}, row 1: ")
    assert "yes/no questions" in line and "'label'" in line and "--caption-col text" in line
    assert store.find_set("pope") is None          # nothing stored half
    # the same records as a JSON array (the json reader picks its columns the same way)
    arr = tmp_path / "pope.json"
    arr.write_text(json.dumps(POPE * 10))
    with pytest.raises(InputError, match="yes/no questions"):
        add_caption_set(store, "pope", arr)
    # the user who names the field reads it as they say
    info = add_caption_set(store, "pope", path, caption_col="text").info
    assert info.n_captions == 40


def test_question_and_prompt_files_are_refused(store, tmp_path):
    bench = [{"image": f"{i:03d}.jpg", "text": q, "category": "conv", "question_id": i}
             for i, q in enumerate(["What is the name of this famous sight in the photo?",
                                    "What are the colors of the bus in the image?",
                                    "How many people are in the picture?"])]
    with pytest.raises(InputError, match=r"hold questions, not captions: 3 of the 3"):
        add_caption_set(store, "b", _write_jsonl(tmp_path / "questions.jsonl", bench))
    prompts = [{"image": f"{i}.jpg", "text": "Describe this image in detail."} for i in range(5)]
    with pytest.raises(InputError, match="prompts to a model"):
        add_caption_set(store, "p", _write_jsonl(tmp_path / "prompts.jsonl", prompts))


def test_captions_that_ask_now_and_then_still_read(store, tmp_path):
    """A caption file where a few captions end with '?' (under the 80% share) is captions."""
    recs = [{"image_id": i, "caption": "A dog on a bench." if i % 3 else "Is that a dog?"}
            for i in range(30)]
    info = add_caption_set(store, "c", _write_jsonl(tmp_path / "c.jsonl", recs)).info
    assert info.n_captions == 30


def test_real_caption_files_still_read(store, shared):
    """The real files of other projects (shared/data/real, the captioners' outputs) read as
    before: the question check does not refuse captions."""
    for name, parts in (("oscar", ("data", "captioners", "oscar_val2014_gender.jsonl")),
                        ("caps", ("data", "real", "capsfusion_example_data.json"))):
        assert add_caption_set(store, name, shared(*parts)).info.n_captions > 0
