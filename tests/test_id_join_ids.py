"""The leaderboard's id judgement (``audit/id_join.check_datasets``) reads each target's image
units from the images the coverage guard reads (``io/targets.target_images``), not from every
caption again. The two readings must name the same units, id typing included: an integer id
as the int the captions carry, an image named by text as its key's unit (one per key).
Checked on a stored set and a caption file of the shared nic captions, and on a hand-made
file of text keys beside a number."""

from __future__ import annotations

import json

from capaudit.audit.id_join import target_ids
from capaudit.io.imageids import ID_LIMIT, keyed_unit
from capaudit.io.ingest import add_caption_set
from capaudit.io.targets import resolve_target


def _from_rows(t) -> set:
    """The units as every caption names them (what the judgement read before)."""
    return {i for i, _ in t.rows() if i is not None}


def test_units_of_a_stored_set_and_of_its_file(shared, store):
    path = shared("data", "captioners", "nic_val2014_gender.jsonl")
    ids = {json.loads(line)["image_id"] for line in path.open()}
    add_caption_set(store, "nic", str(path))
    for t in (resolve_target(store, "nic"), resolve_target(store, str(path))):
        got = target_ids(store, t)
        assert got == _from_rows(t) == ids and all(type(i) is int for i in got)


def test_units_of_text_keys(store, tmp_path):
    rows = [("0801961485534636", "a red car by a wall"), ("00ff12ab34cd56ef", "a blue car"),
            ("0801961485534636", "a car parked outside"), ("391895", "a man on a bike")]
    src = tmp_path / "oi.jsonl"
    src.write_text("".join(json.dumps({"image_id": k, "caption": c}) + "\n" for k, c in rows))
    add_caption_set(store, "oi", str(src))
    want = {keyed_unit("0801961485534636"), keyed_unit("00ff12ab34cd56ef"), 391895}
    for t in (resolve_target(store, "oi"), resolve_target(store, str(src))):
        got = target_ids(store, t)
        assert got == _from_rows(t) == want and sum(u >= ID_LIMIT for u in got) == 2
