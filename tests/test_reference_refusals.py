"""References that cannot support a caption honestly are refused in one line, exit 2, before
anything is written or loaded (real val2017 captions; expectations derived by hand):

- ``filter run --shards DIR --references FILE`` whose ids name none of the shards' images:
  the run judged with no reference at all (the set path refused it already);
- ``--evidence references`` covering too few images: the refusal came only after the
  vocabulary's MiniLM cosines were loaded (minutes on a cold cache);
- ``--reference-col caption``: each caption was its own reference, so every sentence was kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capaudit.cli.main import main


def _cli(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if "Loading weights" not in x]
    assert len(lines) == 1 and lines[0].startswith("capaudit: error: "), err
    return lines[0]


@pytest.fixture
def val2017(shared, tmp_path):
    """4 val2017 images (139, 285, 632, 724), each captioned by its first COCO caption with
    the others as ``references``, as ``in/hyp.jsonl``; and the CHAIR ground truth."""
    doc = json.loads(shared("data", "coco2017", "captions_val2017.json").read_text())
    caps: dict[int, list[str]] = {}
    for a in doc["annotations"]:
        caps.setdefault(a["image_id"], []).append(a["caption"].strip())
    ids = sorted(caps)[:4]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "hyp.jsonl").write_text("".join(
        json.dumps({"image_id": i, "caption": caps[i][0], "references": caps[i][1:]}) + "\n"
        for i in ids))
    return ids, caps, str(shared("data", "coco2014", "chair_objects_trainval2014.jsonl"))


def _refs_file(path: Path, caps: dict, iid: int, shift: int) -> str:
    """A COCO captions JSON of image ``iid``'s other captions, under ``shift + iid``."""
    path.write_text(json.dumps({
        "images": [{"id": shift + iid, "file_name": "x.jpg"}],
        "annotations": [{"id": k, "image_id": shift + iid, "caption": c}
                        for k, c in enumerate(caps[iid][1:])]}))
    return str(path)


def test_shards_references_of_none_of_their_images(val2017, tmp_path, capsys):
    """The references' one image is 10^9 + 139: none of the 4 ids the shard holds."""
    ids, caps, gt = val2017
    refs = _refs_file(tmp_path / "refs.json", caps, 139, 10**9)
    out = tmp_path / "out"
    code, err = _cli(capsys, "filter", "run", "--shards", str(tmp_path / "in"), "--out",
                     str(out), "--filter", "hallucination", "--action", "flag", "--chair-gt",
                     gt, "--references", refs, "--db", str(tmp_path / "s.duckdb"))
    assert code == 2 and "Traceback" not in err
    assert "the references name none of the 4 image ids of the shards (theirs are e.g. " \
           "1000000139)" in _one_line(err)
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))
    # under their own id they join, and the run goes on (139 judged by its references)
    refs = _refs_file(tmp_path / "refs.json", caps, 139, 0)
    code, err = _cli(capsys, "filter", "run", "--shards", str(tmp_path / "in"), "--out",
                     str(out), "--filter", "hallucination", "--action", "flag", "--chair-gt",
                     gt, "--references", refs, "--db", str(tmp_path / "s.duckdb"))
    assert code == 0, err


def test_references_coverage_refused_before_the_model_loads(val2017, tmp_path, capsys,
                                                            monkeypatch):
    """References of 139 alone: 1 of 4 images, under the 50% default; the vocabulary's
    cosines (the MiniLM model on a cold cache) are never asked for."""
    import capaudit.filters.vocab_similarity as vs

    ids, caps, _ = val2017
    asked = []
    monkeypatch.setattr(vs, "neighbours", lambda *a: asked.append(a) or {})
    refs = _refs_file(tmp_path / "refs.json", caps, 139, 0)
    db = str(tmp_path / "s.duckdb")
    assert _cli(capsys, "sets", "add", "hyp", str(tmp_path / "in" / "hyp.jsonl"), "--db",
                db)[0] == 0
    code, err = _cli(capsys, "filter", "run", "hyp", "--filter", "hallucination", "--action",
                     "flag", "--evidence", "references", "--references", refs, "--out",
                     "hyp_f", "--db", db)
    assert code == 2 and "only 1 of the 4 images of 'hyp' (25.0%, below 50%) have " \
                         "reference-caption annotations" in _one_line(err)
    assert asked == []


SELF = "reference column 'caption' is the caption column: each caption would support itself"


def test_caption_column_as_its_own_reference(val2017, tmp_path, capsys):
    """``--reference-col caption``: refused on the set path and the --shards path; the
    ``references`` field, the other captions, still runs."""
    ids, caps, gt = val2017
    db = str(tmp_path / "s.duckdb")
    assert _cli(capsys, "sets", "add", "hyp", str(tmp_path / "in" / "hyp.jsonl"), "--db",
                db)[0] == 0
    common = ("--filter", "hallucination", "--action", "flag", "--chair-gt", gt, "--db", db)
    out = tmp_path / "out"
    for args in (("hyp", "--out", "hyp_f"), ("--shards", str(tmp_path / "in"), "--out",
                                              str(out))):
        code, err = _cli(capsys, "filter", "run", *args, *common, "--reference-col", "caption")
        assert code == 2 and "Traceback" not in err
        line = _one_line(err)
        assert SELF in line and "a reference column other than the caption's" in line
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))
    from capaudit.store import Store

    with Store(db) as store:
        assert store.find_set("hyp_f") is None
    code, err = _cli(capsys, "filter", "run", "hyp", "--out", "hyp_f", *common,
                     "--reference-col", "references")
    assert code == 0, err
