"""#34.1: ``sets export --to llava|sharegpt4v|sharegpt`` keeps each answer with the question it
answered (and the record's other turns the set holds); only a set with no question gets a
prompt, and the message and the provenance say which. Expectations are read from the source
files with plain ``json``, never from the program's output."""

from __future__ import annotations

import json

import pytest

from capaudit.errors import InputError
from capaudit.io.export import export_set, export_with_provenance
from capaudit.io.ingest import add_caption_set

LLAVA_QA = ("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")


def _source_pairs(path) -> list[tuple[str, str]]:
    return [(r["instruction"], r["output"]) for r in map(json.loads, path.read_text().splitlines())]


def test_llava_qa_answers_keep_their_questions(store, shared, tmp_path):
    src = shared(*LLAVA_QA)
    add_caption_set(store, "llava", src)
    pairs = _source_pairs(src)
    assert pairs[0][0] == "What is the position of the skateboard in the image?"  # by eye
    out = json.loads(export_set(store, "llava", "llava", tmp_path / "l.json").read_text())
    got = [(r["conversations"][0]["value"], r["conversations"][1]["value"]) for r in out]
    # the QA layout has no <image> token: LLaVA needs one in front of the first question
    assert got == [("<image>\n" + q, a) for q, a in pairs]
    sg = json.loads(export_set(store, "llava", "sharegpt", tmp_path / "s.json").read_text())
    assert [(r["messages"][0]["content"], r["messages"][1]["content"]) for r in sg] == pairs
    assert not any("Describe the image" in q for q, _ in got)


def _instruct_file(path) -> list[dict]:
    """A LLaVA-Instruct layout written here: several turns per record, the image token after
    the first question in one record and before it in another, and one record whose second
    answer follows the first with no question between them."""
    recs = [
        {"id": "a", "image": "COCO_val2014_000000000001.jpg", "conversations": [
            {"from": "human", "value": "<image>\nWhat animal is on the sofa?"},
            {"from": "gpt", "value": "A dog is lying on the sofa."},
            {"from": "human", "value": "What colour is the sofa?"},
            {"from": "gpt", "value": "The sofa is red."},
            {"from": "human", "value": "Is there a cat?"},
            {"from": "gpt", "value": "A cat sleeps beside the dog."}]},
        {"id": "b", "image": "COCO_val2014_000000000002.jpg", "conversations": [
            {"from": "human", "value": "Where is the bus going?\n<image>"},
            {"from": "gpt", "value": "The bus drives down the street."},
            {"from": "gpt", "value": "It carries people."}]},
    ]
    path.write_text(json.dumps(recs, indent=2))
    return recs


def test_instruct_conversations_come_back_whole(store, tmp_path):
    recs = _instruct_file(tmp_path / "inst.json")
    add_caption_set(store, "all", tmp_path / "inst.json", turns="all")
    out = json.loads(export_set(store, "all", "llava", tmp_path / "o.json").read_text())
    assert [r["conversations"] for r in out] == [r["conversations"] for r in recs]
    assert [r["image"] for r in out] == [r["image"] for r in recs]
    # --turns first holds only the first answer of each record, under its own question
    add_caption_set(store, "first", tmp_path / "inst.json")
    out = json.loads(export_set(store, "first", "sharegpt4v", tmp_path / "f.json").read_text())
    assert [r["conversations"] for r in out] == [r["conversations"][:2] for r in recs]
    # --turns join: one answer made of every answer, under the questions it joins
    add_caption_set(store, "join", tmp_path / "inst.json", turns="join")
    out = json.loads(export_set(store, "join", "llava", tmp_path / "j.json").read_text())
    human = [t["value"] for t in recs[0]["conversations"][0::2]]
    assert out[0]["conversations"][0]["value"] == "\n\n".join(human)


def test_filtered_set_keeps_the_other_turns_with_their_questions(store, tmp_path):
    from capaudit.filters.runner import run_filter

    recs = _instruct_file(tmp_path / "inst.json")
    add_caption_set(store, "all", tmp_path / "inst.json", turns="all")
    gt = tmp_path / "gt.jsonl"   # image 1 holds a dog and a couch, no cat; image 2 a bus
    gt.write_text('{"image_id": 1, "objects": ["dog", "couch"]}\n'
                  '{"image_id": 2, "objects": ["bus", "person"]}\n')
    run_filter(store, "all", "hallucination", {"evidence": "chair-gt", "chair_gt": str(gt)},
               out="clean")
    out = json.loads(export_set(store, "clean", "llava", tmp_path / "c.json").read_text())
    conv = recs[0]["conversations"]
    assert out[0]["conversations"] == conv[:4]   # the cat answer left with its question
    assert out[1]["conversations"] == recs[1]["conversations"]


def test_a_set_without_questions_gets_the_prompt_and_says_so(store, shared, tmp_path):
    src = shared("data", "captioners", "nic_val2014_gender.jsonl")
    lines = src.read_text().splitlines()[:3]
    (tmp_path / "nic.jsonl").write_text("\n".join(lines) + "\n")
    add_caption_set(store, "nic", tmp_path / "nic.jsonl")
    said: dict = {}
    path = export_with_provenance(store, "nic", "llava", tmp_path / "n.json", report=said)
    out = json.loads(path.read_text())
    assert [r["conversations"][0]["value"] for r in out] == \
        ["<image>\nDescribe the image in detail."] * 3
    assert [r["conversations"][1]["value"] for r in out] == \
        [json.loads(x)["caption"] for x in lines]
    prov = json.loads((tmp_path / "n.json.provenance.json").read_text())["config"]
    assert prov["questions"]["prompt"] == "Describe the image in detail."
    assert prov["questions"]["prompt_written"] == 3 and prov["questions"]["with_question"] == 0
    assert "'Describe the image in detail.'" in said["note"] and "3 with no question" in said["note"]
    path = export_with_provenance(store, "nic", "sharegpt", tmp_path / "p.json",
                                  prompt="Write a caption.")
    assert [r["messages"][0]["content"] for r in json.loads(path.read_text())] == \
        ["<image>Write a caption."] * 3


def test_a_set_stored_without_questions_is_refused_not_guessed(store, shared, tmp_path):
    add_caption_set(store, "llava", shared(*LLAVA_QA))
    # a store written before the questions were kept: the same rows, meta without "q"
    store.con.execute("UPDATE captions SET meta = json_object('src', json_extract(meta, '$.src'),"
                      " 'turn', json_extract(meta, '$.turn'))")
    with pytest.raises(InputError, match="older capaudit.*--replace"):
        export_set(store, "llava", "llava", tmp_path / "l.json")
    assert not (tmp_path / "l.json").exists()
    out = export_set(store, "llava", "llava", tmp_path / "l.json", prompt="Answer.")
    assert {r["conversations"][0]["value"] for r in json.loads(out.read_text())} == \
        {"<image>\nAnswer."}


def test_cli_prints_what_each_answer_was_written_under(store, shared, tmp_path, capsys):
    from capaudit.cli.main import main

    db = str(tmp_path / "c.duckdb")
    assert main(["sets", "add", "sg", str(shared("data", "real", "llamafactory_mllm_demo.json")),
                 "--turns", "all", "--db", db]) == 0
    out = tmp_path / "sg.json"
    assert main(["sets", "export", "sg", "--to", "sharegpt", "--out", str(out), "--db", db]) == 0
    said = capsys.readouterr().out
    src = json.loads(shared("data", "real", "llamafactory_mllm_demo.json").read_text())
    n_answers = sum(m["role"] == "assistant" for r in src for m in r["messages"])
    assert f"{n_answers} under the question they answered" in " ".join(said.split())
    assert json.loads(out.read_text()) == src
