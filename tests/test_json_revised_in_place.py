"""A revised caption of a JSON array is replaced where it stands (io/layouts/json, used by
io/rewrite/json_records):
the same bytes as writing the record again wherever the file is json.dumps' own layout, and
everything else kept as it was where it is not."""

from __future__ import annotations

import copy
import json

from capaudit.io.rewrite.base import Place, Record
from capaudit.io.layouts.json import dumps_like, revised_in_place
from capaudit.text.mentions import sentence_spans
from tests.conftest import shared_path


def _revise(value: dict, new: str) -> dict:
    out = copy.deepcopy(value)
    next(t for t in out["conversations"] if t["from"] == "gpt")["value"] = new
    return out


def test_real_sharegpt4v_records_give_dumps_like_bytes():
    records = json.loads(shared_path("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
                         .read_text("utf-8"))
    replaced = 0
    for value in records:
        text = json.dumps(value, indent=1, ensure_ascii=False).replace("\n", "\n ")
        cap = next(t["value"] for t in value["conversations"] if t["from"] == "gpt")
        spans = sentence_spans(cap)
        new = cap[spans[1][0]:] if len(spans) > 1 else ""   # the first sentence dropped
        after = _revise(value, new)
        got = revised_in_place(text, Record(0, [Place(0, cap)]), {0: new}, after)
        assert got is not None
        assert got == dumps_like(after, text, "\n ")
        replaced += 1
    assert replaced == 890


def test_an_unusual_layout_is_kept_around_the_revised_caption():
    text = ('{ "id" :"a\\/b",  "conversations" : [ {"from":"human", "value":"Describe.\\u00e9"},'
            '{"from":"gpt","value":"A dog. A cat."} ] }')
    value = json.loads(text)
    after = _revise(value, "A dog.")
    got = revised_in_place(text, Record(0, [Place(0, "A dog. A cat.")]), {0: "A dog."}, after)
    assert got == text.replace('"A dog. A cat."', '"A dog."')
    assert json.loads(got) == after


def test_not_in_place_when_it_cannot_be_sure():
    text = '{"conversations": [{"from": "human", "value": "A dog."}, {"from": "gpt", "value": "A dog."}]}'
    value = json.loads(text)
    place = Record(0, [Place(0, "A dog.")])
    # the caption's string stands twice (the question says the same): which one is unknown
    assert revised_in_place(text, place, {0: "A cat."}, _revise(value, "A cat.")) is None
    # a dropped caption changes the record's structure
    assert revised_in_place(text, place, {0: None}, value) is None
    # a caption the reader normalised (not the record's own string) is not found
    other = '{"conversations": [{"from": "gpt", "value": "<image>\\nA dog."}]}'
    assert revised_in_place(other, Record(0, [Place(0, "A dog.")]), {0: "A cat."},
                            {"conversations": [{"from": "gpt", "value": "A cat."}]}) is None
    # ... or found once, but in another field: the result would not read back as the record
    decoy = ('{"note": "A dog.", "conversations": [{"from": "gpt", "value": "<image>\\nA dog."}]}')
    after = {"note": "A dog.", "conversations": [{"from": "gpt", "value": "A cat."}]}
    assert revised_in_place(decoy, Record(0, [Place(0, "A dog.")]), {0: "A cat."}, after) is None
