"""The cleaned corpus goes back into training (#12): ``sets export --to original`` and the
training layouts, with round trips on the real LLaVA, CapsFusion and ShareGPT files."""

from __future__ import annotations

import json

import pytest

from capaudit.errors import InputError
from capaudit.io.export import export_set
from capaudit.io.ingest import add_caption_set


@pytest.mark.parametrize("name,options", [
    ("llava_coco2014_val_gpt4_qa_30x3.jsonl", {}),
    ("llava_coco2014_val_gpt4_qa_30x3.jsonl", {"where": "type = 'detail'"}),
    ("capsfusion_example_data.json", {}),
    ("llamafactory_mllm_demo.json", {"turns": "all"}),
])
def test_unfiltered_export_gives_the_source_back(store, shared, tmp_path, name, options):
    src = shared("data", "real", name)
    add_caption_set(store, "s", src, **options)
    out = export_set(store, "s", "original", tmp_path / name)
    assert out.read_bytes() == src.read_bytes()
    assert (tmp_path / (name + ".changes.jsonl")).read_text() == ""


def test_filtered_llava_detail_written_back_in_place(store, shared, tmp_path):
    from capaudit.filters.runner import run_filter

    src = shared("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
    add_caption_set(store, "detail", src, where="type = 'detail'")
    run_filter(store, "detail", "gender-neutral", {"when": "always"}, out="neutral")
    changed = dict(store.sql(
        "SELECT json_extract(c.meta, '$.src')::INT, c.caption FROM captions c JOIN caption_sets "
        "s USING (set_id) WHERE s.name = 'neutral'"))
    out = export_set(store, "neutral", "original", tmp_path / "out.jsonl")
    before = src.read_text().splitlines()
    after = out.read_text().splitlines()
    assert len(after) == len(before) == 90
    n_revised = 0
    for i, (a, b) in enumerate(zip(before, after)):
        ra, rb = json.loads(a), json.loads(b)
        if ra["type"] != "detail" or ra["output"] == changed[i]:
            assert a == b                      # untouched lines: byte for byte
            continue
        n_revised += 1
        assert rb["output"] == changed[i]      # revised text in place ...
        assert {k: v for k, v in rb.items() if k != "output"} == \
            {k: v for k, v in ra.items() if k != "output"}   # ... every other field as it was
    log = [json.loads(x) for x in open(tmp_path / "out.jsonl.changes.jsonl")]
    assert n_revised > 0 and len(log) == n_revised
    assert {e["action"] for e in log} == {"revised"}


def test_dropped_captions_and_turns(store, shared, tmp_path):
    src = shared("data", "real", "llamafactory_mllm_demo.json")
    info = add_caption_set(store, "sg", src, turns="all").info
    recs = json.loads(src.read_text())
    # a derived set as a filter writes it: meta copied, record 0 turn 1 dropped,
    # record 1 dropped entirely (both turns), record 2 turn 0 revised
    rows = store.captions("sg", "image_key, image_id, caption, meta").to_pylist()
    kept = []
    for r in rows:
        m = json.loads(r["meta"])
        if (m["src"], m["turn"]) in ((0, 1), (1, 0), (1, 1)):
            continue
        if (m["src"], m["turn"]) == (2, 0):
            r = {**r, "caption": "Revised."}
        kept.append(r)
    import pyarrow as pa

    store.add_set_from_table("sg_f", pa.Table.from_pylist(kept), source="filter:test",
                             format="filter", parent=info.name)
    out = export_set(store, "sg_f", "original", tmp_path / "sg.json")
    got = json.loads(out.read_text())
    assert len(got) == len(recs) - 1
    assert got[0]["messages"] == recs[0]["messages"][:2]          # question 2 and answer 2 gone
    assert got[1]["messages"][1]["content"] == "Revised."
    assert got[1]["messages"][2:] == recs[2]["messages"][2:] and got[1]["images"] == recs[2]["images"]
    assert got[2:] == recs[3:]
    actions = sorted(json.loads(x)["action"] for x in open(tmp_path / "sg.json.changes.jsonl"))
    assert actions == ["dropped", "revised", "turn dropped", "turn dropped", "turn dropped"]


def test_changed_source_is_refused(store, tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"image_id": 1, "caption": "a dog"}\n')
    add_caption_set(store, "a", path)
    path.write_text('{"image_id": 1, "caption": "a cat"}\n')
    with pytest.raises(InputError, match="missing or changed since it was registered"):
        export_set(store, "a", "original", tmp_path / "b.jsonl")


def test_training_layouts(store, shared, tmp_path):
    src = shared("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
    add_caption_set(store, "d", src, where="type = 'detail'")
    rows = store.captions("d").to_pylist()
    sg4v = json.loads(export_set(store, "d", "sharegpt4v", tmp_path / "d.json").read_text())
    assert [r["conversations"][1]["value"] for r in sg4v] == [r["caption"] for r in rows]
    assert sg4v[0]["image"] == "COCO_val2014_000000525439.jpg"
    coco = json.loads(export_set(store, "d", "coco", tmp_path / "c.json").read_text())
    assert len(coco["images"]) == 30 and coco["annotations"][0]["image_id"] == 525439
    # the exported files read back as the same captions
    add_caption_set(store, "back", tmp_path / "d.json")
    assert store.captions("back").column("caption").to_pylist() == [r["caption"] for r in rows]
    add_caption_set(store, "cf", shared("data", "real", "capsfusion_example_data.json"))
    with pytest.raises(InputError, match="has no integer image id"):
        export_set(store, "cf", "coco", tmp_path / "cf.json")


def _llava_conversations(shared, path):
    """LLaVA's instruction layout (``llava_instruct_150k.json``) from the real GPT-4 answers:
    one record per image, its three questions as three turns, the ``<image>`` token on the
    first question (in front, ``<image>\\nQ``, or after it, ``Q\\n<image>``: LLaVA writes
    both); last, a record with two answers to one question."""
    src = shared("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
    by_image: dict = {}
    for line in src.read_text().splitlines():
        row = json.loads(line)
        by_image.setdefault(row["id"], []).append(row)
    recs = []
    for n, rows in enumerate(by_image.values()):
        conv = []
        for k, row in enumerate(rows):
            q = row["instruction"]
            if k == 0:
                q = f"<image>\n{q}" if n % 2 == 0 else f"{q}\n<image>"
            conv += [{"from": "human", "value": q}, {"from": "gpt", "value": row["output"]}]
        recs.append({"id": rows[0]["id"], "image": rows[0]["image"], "conversations": conv})
    recs.append({"id": "x", "image": recs[0]["image"], "conversations": [
        {"from": "human", "value": "<image>\nDescribe the image."},
        {"from": "gpt", "value": "A skateboard."}, {"from": "gpt", "value": "It is upside down."}]})
    path.write_text(json.dumps(recs, indent=2))
    return recs


def _drop_turns(store, name, parent, drop):
    """A derived set as a filter writes it (meta copied), without the turns in ``drop``."""
    import pyarrow as pa

    rows = [r for r in store.captions(parent, "image_key, image_id, caption, meta").to_pylist()
            if (json.loads(r["meta"])["src"], json.loads(r["meta"])["turn"]) not in drop]
    store.add_set_from_table(name, pa.Table.from_pylist(rows), source="filter:test",
                             format="filter", parent=parent)


def test_dropped_first_turn_keeps_the_image_token(store, shared, tmp_path):
    recs = _llava_conversations(shared, tmp_path / "llava.json")
    add_caption_set(store, "lv", tmp_path / "llava.json", turns="all")
    last = len(recs) - 1
    _drop_turns(store, "lv_f", "lv", {(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (3, 1), (last, 0)})
    out = export_set(store, "lv_f", "original", tmp_path / "out.json")
    got = json.loads(out.read_text())
    assert len(got) == len(recs) - 2            # record 2: no answer left; the last: no question
    c0, c1 = recs[0]["conversations"], recs[1]["conversations"]
    assert got[0]["conversations"] == [{"from": "human", "value": "<image>\n" + c0[2]["value"]},
                                       c0[3], c0[4], c0[5]]
    assert got[1]["conversations"] == [{"from": "human", "value": c1[2]["value"] + "\n<image>"},
                                       c1[3], c1[4], c1[5]]
    assert got[2]["conversations"] == recs[3]["conversations"][:2] + recs[3]["conversations"][4:]
    assert got[3:] == recs[4:last]
    for rec in got:                              # what LLaVA's trainer checks: one per image
        assert sum(t["value"].count("<image>") for t in rec["conversations"]) == 1
    log = [json.loads(x) for x in open(tmp_path / "out.json.changes.jsonl")]
    assert [(e["record"], e["after"]) for e in log if e["action"] == "token moved"] == \
        [(0, "<image>\n" + c0[2]["value"]), (1, c1[2]["value"] + "\n<image>")]
    assert [e["record"] for e in log if e.get("why") == "no question left to carry its "
            "<image> token"] == [last]


def test_cli_names_records_dropped_for_their_token(shared, tmp_path, capsys):
    from capaudit.cli.main import main
    from capaudit.store.db import Store

    recs = _llava_conversations(shared, tmp_path / "llava.json")
    db = str(tmp_path / "s.duckdb")
    assert main(["sets", "add", "lv", str(tmp_path / "llava.json"), "--turns", "all",
                 "--db", db]) == 0
    with Store(db) as store:
        _drop_turns(store, "lv_f", "lv", {(len(recs) - 1, 0)})
    capsys.readouterr()
    assert main(["sets", "export", "lv_f", "--to", "original", "--out",
                 str(tmp_path / "o.json"), "--db", db]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"1 records dropped: no question left to carry its <image> token (source records " \
           f"{len(recs)}; listed in the changes file)" in printed
    listed = sum(1 for _ in open(tmp_path / "o.json.changes.jsonl", encoding="utf-8"))
    assert listed >= 1 and f"{listed:,} changes listed in " in printed


def test_filtered_answers_keep_the_source_paragraphs(store, shared, tmp_path):
    """LLaVA's detailed descriptions filtered with instance evidence: the export keeps the
    source's paragraph breaks and spacing between the kept sentences."""
    from capaudit.filters.runner import run_filter
    from capaudit.text.mentions import sentence_spans

    src = shared("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
    add_caption_set(store, "detail", src, where="type = 'detail'")
    run_filter(store, "detail", "hallucination", {
        "evidence": "instances",
        "instances": str(shared("data", "coco2014", "instance_categories_val2014.jsonl"))},
        out="f")
    out = export_set(store, "f", "original", tmp_path / "out.jsonl")
    before = [json.loads(x)["output"] for x in src.read_text().splitlines()]
    after = [json.loads(x)["output"] for x in out.read_text().splitlines()]
    # record 5, by hand: "The car is parked in front of a building ..." and "A gray car ...
    # and a truck ..." went; the break (" \n\n", as written) between the kept ones stays
    assert after[4] == (
        "The scene features a black car parked on the side of the road next to a parking "
        "meter. There is another parking meter slightly further ahead of the car. \n\n"
        "Additionally, there are other vehicles in the image. Moreover, there is another "
        "vehicle barely visible on the left side of the scene.")
    breaks_in_source = breaks_kept = 0
    for old, new in zip(before, after):
        if old == new:
            continue
        sents = [old[a:b] for a, b in sentence_spans(old)]
        gaps = [old[b:c] for (_, b), (c, _) in zip(sentence_spans(old), sentence_spans(old)[1:])]
        kept = [k for k, s in enumerate(sents) if s in new]
        # a break survives when it lies between two kept sentences
        expected = sum(any("\n\n" in g for g in gaps[a:b]) for a, b in zip(kept, kept[1:]))
        assert new.count("\n\n") == expected, (old, new)
        breaks_in_source += old.count("\n\n")
        breaks_kept += new.count("\n\n")
    # 13 breaks in the 14 revised answers; the 2 that go end answers whose last paragraph went
    assert (breaks_in_source, breaks_kept) == (13, 11)


def test_sharegpt_messages_keep_the_image_token(store, shared, tmp_path):
    """LLaMA-Factory's ``messages`` layout, as its mllm_demo.json now writes it: the real
    demo with ``<image>`` in front of each record's first question."""
    recs = json.loads(shared("data", "real", "llamafactory_mllm_demo.json").read_text())
    for rec in recs:
        rec["messages"][0]["content"] = "<image>" + rec["messages"][0]["content"]
    (tmp_path / "sg.json").write_text(json.dumps(recs, indent=2, ensure_ascii=False))
    add_caption_set(store, "sg", tmp_path / "sg.json", turns="all")
    _drop_turns(store, "sg_f", "sg", {(0, 0), (1, 1)})
    got = json.loads(export_set(store, "sg_f", "original", tmp_path / "o.json").read_text())
    assert got[0]["messages"] == [{"content": "<image>What are they doing?", "role": "user"},
                                  recs[0]["messages"][3]]
    assert got[1]["messages"] == recs[1]["messages"][:2] and got[2:] == recs[2:]
