"""CHAIR's own output is read (#46.2): the ``{"sentences": [...], "overall_metrics": {...}}``
file that LisaAnne/Hallucination's and Maxlinn/CHAIR-metric-standalone's ``chair.py`` write.
The real file is the reference output in shared/references/chair_maxlinn_example (written by
Maxlinn's code, ``indent=2``); LisaAnne's layout is the same document as ``json.dump`` writes
it (no indent) with its language metrics. Read with ids in coco2014, the file's own scores
kept and shown beside capaudit's, written back byte for byte, and after a filter in its own
layout."""

from __future__ import annotations

import json

from capaudit.cli.main import main
from capaudit.filters.runner import run_filter
from capaudit.io.export import export_set
from capaudit.io.ingest import add_caption_set
from capaudit.io.readers import detect_format
from shard_fixtures import CAPTIONS, EVIDENCE, write_evidence


def _reference(shared):
    return shared("references", "chair_maxlinn_example", "reference_outputs.json")


def _lisaanne(doc: dict) -> dict:
    """The reference document in LisaAnne's layout: language metrics beside CHAIR's."""
    doc = json.loads(json.dumps(doc))
    for sent in doc["sentences"]:
        sent["metrics"] = {"Bleu_1": 0.5, "CIDEr": 0.25, **sent["metrics"]}
        del sent["metrics"]["Recall"]
    doc["overall_metrics"] = {"Bleu_1": 0.61, "METEOR": 0.2, "CIDEr": 0.9, "SPICE": 0.18,
                              "CHAIRs": 0.0, "CHAIRi": 0.0}
    return doc


def test_reference_output_is_read_and_written_back_byte_for_byte(store, shared, tmp_path):
    path = _reference(shared)
    doc = json.loads(path.read_text())
    assert detect_format(path) == "chair"
    info = add_caption_set(store, "ref", path).info
    assert (info.format, info.n_captions, info.namespace) == ("chair", 2, "coco2014")
    rows = store.sql("SELECT image_id, caption, meta, namespace FROM captions WHERE set_id = ? "
                     "ORDER BY row_idx", [info.set_id])
    assert [(r[0], r[1]) for r in rows] == [(s["image_id"], s["caption"])
                                             for s in doc["sentences"]]
    assert [json.loads(r[2])["chair"] for r in rows] == [s["metrics"] for s in doc["sentences"]]
    assert {r[3] for r in rows} == {"coco2014"}
    assert info.meta["file_metrics"]["overall"] == doc["overall_metrics"]
    out = export_set(store, "ref", "original", tmp_path / "back.json")
    assert out.read_bytes() == path.read_bytes()
    # LisaAnne's layout: json.dump with no indent, BLEU/CIDEr beside CHAIR
    lisa = tmp_path / "hallucinated_words_fc_beam5_test.json"
    lisa.write_text(json.dumps(_lisaanne(doc)))
    assert detect_format(lisa) == "chair"
    add_caption_set(store, "lisa", lisa)
    assert export_set(store, "lisa", "original", tmp_path / "l.json").read_bytes() == \
        lisa.read_bytes()


def _chair_file(path, captions):
    """A CHAIR output in Maxlinn's layout (indent=2, ensure_ascii=False) of ``captions``."""
    sents = [{"image_id": iid, "caption": cap, "mscoco_hallucinated_words": [],
              "mscoco_gt_words": EVIDENCE[iid], "mscoco_generated_words": [],
              "hallucination_idxs": [], "words": cap.lower().split(),
              "metrics": {"CHAIRs": 0, "CHAIRi": 0.0, "Recall": 1.0}} for iid, cap in captions]
    doc = {"sentences": sents, "overall_metrics": {"CHAIRs": 0.2, "CHAIRi": 0.1, "Recall": 0.9}}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    return doc


def test_a_filtered_chair_output_keeps_its_layout(store, tmp_path):
    doc = _chair_file(tmp_path / "chair.json", [(iid, cap) for iid, cap, _ in CAPTIONS])
    add_caption_set(store, "c", tmp_path / "chair.json")
    run_filter(store, "c", "hallucination",
               {"chair_gt": str(write_evidence(tmp_path / "gt.jsonl"))}, out="f")
    report: dict = {}
    out = export_set(store, "f", "original", tmp_path / "f.json", report=report)
    # by hand: each sentence keeps every field but its revised caption; image 3's goes
    want = json.loads(json.dumps(doc))
    want["sentences"] = [{**s, "caption": after} for s, (_, _, after)
                         in zip(want["sentences"], CAPTIONS) if after is not None]
    assert out.read_text() == json.dumps(want, indent=2, ensure_ascii=False)
    assert "describe the captions before revision" in report["note"]
    listed = [json.loads(line) for line in open(str(out) + ".changes.jsonl")]
    assert [(e["record"], e["action"]) for e in listed] == [
        (0, "revised"), (2, "dropped"), (3, "revised")]


def _ref_and_variant(tmp_path, shared) -> tuple[str, str]:
    """Sets ref (the reference output) and variant (the same, sentence 2 scored hallucinated,
    overall CHAIRs 0.5, as another CHAIR variant would), and the CHAIR ground truth."""
    doc = json.loads(_reference(shared).read_text())
    doc["sentences"][1]["metrics"]["CHAIRs"] = 1
    doc["overall_metrics"]["CHAIRs"] = 0.5
    variant = tmp_path / "variant.json"
    variant.write_text(json.dumps(doc))
    db = str(tmp_path / "s.duckdb")
    for name, path in (("ref", _reference(shared)), ("variant", variant)):
        assert main(["sets", "add", name, str(path), "--db", db]) == 0
    return db, str(shared("data", "coco2014", "chair_objects_trainval2014.jsonl"))


def test_file_scores_beside_capaudits(tmp_path, shared, capsys):
    """The file's CHAIR_s and capaudit's side by side, and where they differ the note: the
    reference output agrees with capaudit (both 0.00); the same file as a variant scored it
    (sentence 2 called hallucinated, overall CHAIR_s 0.5) is named as differing."""
    db, gt = _ref_and_variant(tmp_path, shared)
    capsys.readouterr()
    assert main(["sets", "show", "ref", "--db", db]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "the file's own scores (chair output, 2 captions, x 100): CHAIRs 0.00, CHAIRi " \
           "0.00, Recall 85.71" in shown
    assert main(["audit", "run", "ref", "variant", "--chair-gt", str(gt), "--metrics",
                 "chair_s,chair_i", "--n-boot", "50", "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "ref: the file's own scores (2 captions, x 100) beside capaudit's: CHAIR_s: " \
           "file's 0.00, capaudit's 0.00 (n = 2" in out
    assert "ref: per caption, CHAIR_s agrees on 2 of 2" in out
    assert "ref: they differ" not in out
    assert "CHAIR_s: file's 50.00, capaudit's 0.00" in out
    assert "variant: per caption, CHAIR_s agrees on 1 of 2; judged otherwise: sentence 2" in out
    assert "variant: they differ: the file was likely scored with another CHAIR variant" in out


def test_file_scores_in_compare_and_run_json(tmp_path, shared, capsys):
    """``audit compare`` (terminal and report.md) and ``audit run --json`` carry the same
    lines as ``audit run``; where compare scores only part of a set (the images it shares
    with another), the file's overall is shown on its own, never called a different variant."""
    db, gt = _ref_and_variant(tmp_path, shared)
    chair = ["--chair-gt", gt, "--metrics", "chair_s,chair_i", "--n-boot", "50", "--db", db]
    capsys.readouterr()
    assert main(["audit", "compare", "ref", "variant", "--report", str(tmp_path / "r"),
                 *chair]) == 0
    out = " ".join(capsys.readouterr().out.split())
    report = " ".join((tmp_path / "r" / "report.md").read_text().split())
    for text in (out, report):
        assert "ref: per caption, CHAIR_s agrees on 2 of 2" in text
        assert "variant: the file's own scores (2 captions, x 100) beside capaudit's: CHAIR_s: " \
               "file's 50.00, capaudit's 0.00 (n = 2" in text
        assert "variant: per caption, CHAIR_s agrees on 1 of 2; judged otherwise: sentence 2" \
            in text
        assert "variant: they differ" in text and "ref: they differ" not in text
    assert main(["audit", "run", "ref", "variant", "--json", str(tmp_path / "a.json"),
                 *chair]) == 0
    got = json.loads((tmp_path / "a.json").read_text())["file_scores"]
    assert got["variant"]["overall"]["CHAIRs"] == 0.5 and got["ref"]["captions"] == 2
    assert got["variant"]["agreement"] == {"captions": 2, "judged_otherwise": 1,
                                           "first_rows": [2]}
    assert got["ref"]["agreement"]["judged_otherwise"] == 0
    assert "variant: they differ" in got["variant"]["lines"][-1]
    # one of ref's two images beside ref: capaudit scores ref on that image only
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"image": "COCO_val2014_000000001290.jpg",
                               "caption": "a man riding a horse"}) + "\n")
    capsys.readouterr()
    assert main(["audit", "compare", "ref", str(one), "--report", str(tmp_path / "r"),
                 *chair]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "ref: the file's own scores (chair output, 2 captions, x 100): CHAIRs 0.00, " \
           "CHAIRi 0.00, Recall 85.71, on all its captions; capaudit's here rest on the " \
           "compared images only" in out
    assert "they differ" not in out and "agrees on" not in out


def test_file_scores_of_a_chair_file_given_as_a_file(tmp_path, shared, capsys):
    """A CHAIR output given to ``audit run`` / ``audit compare`` as a file (not registered):
    its own scores read back from it, the per-caption agreement by row as for a set."""
    db, gt = _ref_and_variant(tmp_path, shared)
    chair = ["--chair-gt", gt, "--metrics", "chair_s,chair_i", "--n-boot", "50", "--db", db]
    files = [str(tmp_path / "variant.json"), str(_reference(shared))]
    capsys.readouterr()
    assert main(["audit", "run", *files, "--json", str(tmp_path / "a.json"), *chair]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "variant: per caption, CHAIR_s agrees on 1 of 2; judged otherwise: sentence 2" in out
    assert "reference_outputs: per caption, CHAIR_s agrees on 2 of 2" in out
    got = json.loads((tmp_path / "a.json").read_text())["file_scores"]
    assert got["variant"]["agreement"] == {"captions": 2, "judged_otherwise": 1,
                                           "first_rows": [2]}
    assert main(["audit", "compare", *files, "--report", str(tmp_path / "r"), *chair]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "variant: they differ" in out and "reference_outputs: they differ" not in out


def test_a_chair_file_given_as_a_file_is_parsed_once(tmp_path, shared, capsys, monkeypatch):
    """Its own scores come from what the reader kept as the audit read it: the JSON document
    is parsed once (report/file_scores once parsed the file a second time), and the lines
    and ``--json`` are those of the two-parse code (the agreement by row above too)."""
    import capaudit.io.readers.chair as chair

    _, gt = _ref_and_variant(tmp_path, shared)
    parsed = []

    def counted(path):
        parsed.append(path)
        return load(path)
    load = chair.load_json_document
    monkeypatch.setattr(chair, "load_json_document", counted)
    capsys.readouterr()
    assert main(["audit", "run", str(tmp_path / "variant.json"), "--chair-gt", gt, "--metrics",
                 "chair_s,chair_i", "--n-boot", "50", "--json", str(tmp_path / "a.json"),
                 "--db", str(tmp_path / "f.duckdb")]) == 0
    assert len(parsed) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "variant: the file's own scores (2 captions, x 100) beside capaudit's: CHAIR_s: " \
           "file's 50.00, capaudit's 0.00 (n = 2" in out
    got = json.loads((tmp_path / "a.json").read_text())["file_scores"]["variant"]
    assert got["agreement"] == {"captions": 2, "judged_otherwise": 1, "first_rows": [2]}
    assert got["overall"]["CHAIRs"] == 0.5 and got["format"] == "chair"


def test_a_chair_file_given_as_a_url_has_its_own_scores(tmp_path, shared, capsys):
    """A URL (memory:// here) is read from a local copy by the same reader: its own scores
    are set beside capaudit's as a local file's are (the second parse looked for the URL on
    the disk and found none, so they were left out)."""
    from capaudit.core.storage.folder import Folder

    _, gt = _ref_and_variant(tmp_path, shared)
    url = Folder("memory://chair-own-scores").url("variant.json")
    Folder("memory://chair-own-scores").write_bytes("variant.json",
                                                   (tmp_path / "variant.json").read_bytes())
    got = {}
    for tag, target in (("url", url), ("file", str(tmp_path / "variant.json"))):
        capsys.readouterr()
        assert main(["audit", "run", target, "--chair-gt", gt, "--metrics", "chair_s,chair_i",
                     "--n-boot", "50", "--json", str(tmp_path / f"{tag}.json"),
                     "--db", str(tmp_path / f"{tag}.duckdb")]) == 0
        got[tag] = json.loads((tmp_path / f"{tag}.json").read_text())["file_scores"]
    assert got["url"] == got["file"] and got["url"]["variant"]["agreement"]["captions"] == 2


def test_compare_names_a_partly_scored_chair_file_by_the_target_that_audits_it(tmp_path, shared,
                                                                               capsys):
    """A CHAIR output compared on part of its images, given as a file (not registered): the
    line's "capaudit audit run X does" names the file, and that command runs (it named the
    set, which no store holds, so it failed: "'reference_outputs' is neither a registered
    set nor a file")."""
    _, gt = _ref_and_variant(tmp_path, shared)
    chair = ["--chair-gt", gt, "--metrics", "chair_s,chair_i", "--n-boot", "50"]
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"image": "COCO_val2014_000000001290.jpg",
                               "caption": "a man riding a horse"}) + "\n")
    ref = str(_reference(shared))
    capsys.readouterr()
    assert main(["audit", "compare", ref, str(one), "--report", str(tmp_path / "r"), *chair,
                 "--db", str(tmp_path / "c.duckdb")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"so they are not set beside them (capaudit audit run {ref} does)" in out, out
    assert main(["audit", "run", ref, *chair, "--db", str(tmp_path / "c.duckdb")]) == 0
    assert "reference_outputs: per caption, CHAIR_s agrees on 2 of 2" in \
        " ".join(capsys.readouterr().out.split())


def test_a_chair_file_given_as_a_file_url_is_the_local_file(tmp_path, shared, capsys):
    """``file:///PATH`` (how the project names "this path on every node"; capability's
    --annotations take it) as an ``audit run`` target: it was "'file:///...' is neither a
    registered set nor a file"; it is now the file it names, own scores and all."""
    _, gt = _ref_and_variant(tmp_path, shared)
    got = {}
    for tag, target in (("url", f"file://{tmp_path / 'variant.json'}"),
                        ("file", str(tmp_path / "variant.json"))):
        capsys.readouterr()
        assert main(["audit", "run", target, "--chair-gt", gt, "--metrics", "chair_s,chair_i",
                     "--n-boot", "50", "--json", str(tmp_path / f"{tag}.json"),
                     "--db", str(tmp_path / f"{tag}.duckdb")]) == 0, capsys.readouterr().err
        got[tag] = json.loads((tmp_path / f"{tag}.json").read_text())
    assert got["url"]["file_scores"]["variant"]["agreement"]["captions"] == 2
    assert got["url"] == got["file"]   # sets (values, n), coverage, file_scores
