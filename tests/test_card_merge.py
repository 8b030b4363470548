"""#34.2: ``audit card --out README.md`` merges into the dataset's card (huggingface_hub's
DatasetCard): its YAML metadata and text stay, capaudit's section between markers is
replaced on a rerun, Hub metadata is completed (license kept or asked for), no local path is
written, and a filtered set's card gives what its filter removed and its independent score.
The removal counts are checked on a file written here and counted by hand."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from capaudit.cli.main import main
from capaudit.report.card_file import BEGIN, END

GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
INSTANCES = ("data", "coco2014", "instance_categories_val2014.jsonl")

EXISTING = """---
license: cc-by-4.0
pretty_name: My LLaVA answers
language:
- en
tags:
- vision
configs:
- config_name: default
  data_files: data/*.json
---

# My LLaVA answers

<img src="badge.svg"> Hand-written intro that must survive, *with* markdown.

## Citation

Cite us.
"""


def _split(text: str) -> tuple[dict, str]:
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The store every test starts from (copied): annotations, llava and llava_cg."""
    from tests.conftest import shared_path

    path = str(tmp_path_factory.mktemp("built") / "c.duckdb")
    for kind, parts in (("chair-gt", GT), ("instances", INSTANCES)):
        assert main(["annotations", "add", kind, str(shared_path(*parts)), "--db", path]) == 0
    assert main(["sets", "add", "llava", str(shared_path("data", "real",
                 "llava_coco2014_val_gpt4_qa_30x3.jsonl")), "--db", path]) == 0
    assert main(["filter", "run", "llava", "--filter", "hallucination", "--evidence",
                 "chair-gt", "--out", "llava_cg", "--db", path]) == 0
    return path


@pytest.fixture
def db(built, tmp_path):
    import shutil

    (tmp_path / "store").mkdir()
    return str(shutil.copy(built, tmp_path / "store" / "c.duckdb"))


def _card(db, out, *extra, metrics="chair_s,chair_i"):
    return main(["audit", "card", "llava_cg", "--out", str(out), "--metrics", metrics,
                 "--n-boot", "50", *extra, "--db", db])


def test_existing_card_is_merged_not_replaced(shared, db, tmp_path, capsys):
    out = tmp_path / "README.md"
    out.write_text(EXISTING)
    before_meta, before_body = _split(EXISTING)
    assert _card(db, out) == 0
    meta, body = _split(out.read_text())
    for key in ("license", "pretty_name", "language", "configs"):
        assert meta[key] == before_meta[key]           # every key of the card, as it was
    assert meta["tags"] == ["vision", "capaudit"]
    assert meta["task_categories"] == ["image-to-text"]
    assert meta["size_categories"] == ["n<1K"]           # 90 captions
    assert body.startswith(before_body)                  # the text, byte for byte, first
    assert body.count(BEGIN) == body.count(END) == 1
    assert meta["capaudit_audit"]["sets"]["llava_cg"]["metrics"]["chair_s"]["status"] == \
        "circular"
    # a rerun replaces the section (and the audit key) and nothing else
    assert _card(db, out, metrics="chair_s") == 0
    meta2, body2 = _split(out.read_text())
    assert body2.startswith(before_body) and body2.count(BEGIN) == 1
    assert "| CHAIR_i |" not in body2 and "| CHAIR_s |" in body2
    assert set(meta2["capaudit_audit"]["sets"]["llava_cg"]["metrics"]) == {"chair_s", "lic"}
    assert meta2["tags"] == ["vision", "capaudit"]       # not added twice


def test_no_local_path_on_the_card(shared, db, tmp_path):
    out = tmp_path / "card" / "README.md"
    assert _card(db, out, "--chair-gt", str(shared(*GT))) == 0
    text = out.read_text()
    for private in (str(tmp_path), db, "store:", str(shared(*GT).parent), "c.duckdb", "--db"):
        assert private not in text, private
    sha = hashlib.sha256(shared(*GT).read_bytes()).hexdigest()
    meta, body = _split(text)
    assert meta["capaudit_audit"]["annotations"]["chair_gt"] == {
        "what": "CHAIR ground truth", "sha256": sha}
    assert f"- CHAIR ground truth: 30 of 30 images (100.0%), sha256 `{sha}`" in body
    assert "--chair-gt chair_objects_trainval2014.jsonl" in body   # the file's name only


def test_license_kept_or_asked_for(db, tmp_path, capsys):
    out = tmp_path / "README.md"
    capsys.readouterr()
    assert _card(db, out) == 0                           # a new card: no license known
    said = " ".join(capsys.readouterr().out.split())
    assert "the card has no license: pass --license ID" in said
    assert "license" not in _split(out.read_text())[0]
    assert _card(db, out, "--license", "mit") == 0
    assert _split(out.read_text())[0]["license"] == "mit"
    capsys.readouterr()
    assert _card(db, out, "--license", "apache-2.0") == 0  # the card's own stays
    assert _split(out.read_text())[0]["license"] == "mit"
    assert "kept the card's license (mit)" in " ".join(capsys.readouterr().out.split())


def test_unreadable_card_is_refused_and_left_alone(db, tmp_path, capsys):
    out = tmp_path / "README.md"
    broken = "---\nlicense: [cc-by-4.0\n---\n\nMy text.\n"
    out.write_text(broken)
    capsys.readouterr()
    assert _card(db, out) == 2
    assert out.read_text() == broken
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "YAML metadata cannot be read" in err


def test_a_card_from_an_earlier_capaudit_is_updated_in_place(db, tmp_path):
    out = tmp_path / "README.md"
    out.write_text("---\nlicense: mit\ncapaudit_audit:\n  version: 0.0.9\n---\n\n# Data\n\n"
                   "Intro.\n\n## Audit (capaudit)\n\nold numbers\n")
    assert _card(db, out) == 0
    meta, body = _split(out.read_text())
    assert body.startswith("\n# Data\n\nIntro.\n\n" + BEGIN) and "old numbers" not in body
    assert meta["capaudit_audit"]["version"] != "0.0.9"


def test_filtered_set_card_gives_removed_counts_and_independent_score(db, tmp_path):
    caps = tmp_path / "caps.jsonl"   # image 1 holds a dog and a couch; image 2 a bus
    caps.write_text("\n".join(json.dumps({"image_id": i, "caption": c}) for i, c in [
        (1, "A dog lies on a sofa. A cat sleeps beside it."),   # the cat sentence goes
        (1, "A cat."),                                          # the whole caption goes
        (2, "A bus drives down a street.")]) + "\n")
    gt = tmp_path / "gt.jsonl"
    gt.write_text('{"image_id": 1, "objects": ["dog", "couch"]}\n'
                  '{"image_id": 2, "objects": ["bus"]}\n')
    assert main(["sets", "add", "mine", str(caps), "--db", db]) == 0
    assert main(["filter", "run", "mine", "--filter", "hallucination", "--chair-gt", str(gt),
                 "--out", "mine_clean", "--db", db]) == 0
    out = tmp_path / "README.md"
    assert main(["audit", "card", "mine_clean", "--out", str(out), "--chair-gt", str(gt),
                 "--metrics", "chair_s", "--min-n", "1", "--allow-partial", "--n-boot", "20",
                 "--db", db]) == 0
    body = _split(out.read_text())[1]
    # by hand: 4 sentences in, 2 removed; 3 captions in, 1 removed
    assert "- sentences removed: 2 of 4 (revised 0, flagged for review 0)" in body
    assert "- captions removed: 1 of 3 (every sentence of a caption removed)" in body
    sha = hashlib.sha256(gt.read_bytes()).hexdigest()
    assert f"evidence: CHAIR ground truth (sha256 `{sha}`)" in body
    assert "- CHAIR_s: circular under the evidence the filter used; independent:" in body


def test_api_card_is_the_cli_card(db, tmp_path):
    import capaudit

    a, b = tmp_path / "a" / "README.md", tmp_path / "b" / "README.md"
    for p in (a, b):
        p.parent.mkdir()
        p.write_text(EXISTING)
    assert _card(db, a) == 0
    said = capaudit.open(db).card("llava_cg", b, metrics=["chair_s", "chair_i"], n_boot=50)
    assert said == []                                   # the card has a license
    ma, mb = _split(a.read_text())[0], _split(b.read_text())[0]
    sa, sb = (m["capaudit_audit"]["sets"]["llava_cg"]["metrics"] for m in (ma, mb))
    assert {k: (v["value"], v["status"]) for k, v in sa.items()} == \
        {k: (v["value"], v["status"]) for k, v in sb.items()}


def test_missing_huggingface_hub_names_the_extra(db, tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    out = tmp_path / "README.md"
    out.write_text(EXISTING)
    capsys.readouterr()
    assert _card(db, out) == 2
    assert "pip install 'capaudit[hf]'" in capsys.readouterr().err
    assert out.read_text() == EXISTING
