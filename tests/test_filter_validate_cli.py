"""``capaudit filter validate`` end to end on the dev set: the human_labels README's baseline,
the plain layouts against an independent count in plain Python, bad input refused in one
line with nothing stored."""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import shared_path

from capaudit.cli.main import main


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    """The 180 FaithScore records as a set, filtered with the defaults and --action flag."""
    labels = shared_path("data", "human_labels", "faithscore_annotation.jsonl")
    gt = shared_path("data", "coco2014", "chair_objects_trainval2014.jsonl")
    tmp = tmp_path_factory.mktemp("dev")
    src = tmp / "fs.jsonl"
    src.write_text("".join(json.dumps({"image_id": int(r["id"]), "caption": r["answer"]}) + "\n"
                           for r in map(json.loads, labels.read_text().splitlines())))
    db = str(tmp / "v.duckdb")
    assert main(["sets", "add", "fs", str(src), "--db", db]) == 0
    assert main(["filter", "run", "fs", "--filter", "hallucination", "--out", "fsf", "--action",
                 "flag", "--chair-gt", str(gt), "--db", db]) == 0
    return {"db": db, "labels": labels, "tmp": tmp}


def _stored(db: str) -> int:
    from capaudit.store import Store

    with Store(db, read_only=True) as s:
        return s.sql("SELECT count(*) FROM filter_validations")[0][0]


def test_dev_set_baseline_of_the_readme(dev, tmp_path):
    out, dis = tmp_path / "v.json", tmp_path / "d.jsonl"
    assert main(["filter", "validate", str(dev["labels"]), "--set", "fsf", "--json", str(out),
                 "--disagreements", str(dis), "--db", dev["db"]]) == 0
    res = json.loads(out.read_text())
    cap = res["caption"]
    assert cap["counts"] == {"tp": 34, "fp": 10, "fn": 44, "tn": 83}
    assert (round(cap["precision"], 3), round(cap["recall"], 3), round(cap["f1"], 3)) == \
        (0.773, 0.436, 0.557)
    assert (cap["n"], cap["n_precision"], cap["n_recall"], cap["n_images"]) == (171, 44, 78, 30)
    assert res["status"] == "ok" and res["matching"]["matched"] == 171
    assert res["matching"]["repeats"]["disagreeing"] == 2 and "sentence" not in res
    assert cap["ci"]["precision"][0] < cap["precision"] < cap["ci"]["precision"][1]
    assert sum(cap["by_reason"]["unsupported"].values()) == 44
    assert cap["by_reason"]["kept"] == {"tp": 0, "fp": 0, "fn": 44, "tn": 83}
    assert cap["by_evidence"] == {"chair-gt": cap["counts"]}
    rows = [json.loads(line) for line in dis.read_text().splitlines()]
    assert len(rows) == 54 == sum(r["kind"] == "missed" for r in rows) + 10
    assert (tmp_path / "d.jsonl.provenance.json").exists()
    assert _stored(dev["db"]) >= 1


def _log(db: str):
    from capaudit.store import Store

    with Store(db, read_only=True) as s:
        caps = dict(s.sql("SELECT row_idx, caption FROM captions c JOIN caption_sets s "
                          "USING (set_id) WHERE s.name = 'fs'"))
        ids = dict(s.sql("SELECT row_idx, image_id FROM captions c JOIN caption_sets s "
                         "USING (set_id) WHERE s.name = 'fs'"))
        log = s.sql("SELECT row_idx, sentence_idx, original, action FROM filter_log WHERE "
                    "set_name = 'fsf' ORDER BY row_idx, sentence_idx")
    return caps, ids, log


def _label(text: str) -> int:   # a fixed pseudo-label per sentence text (repeats agree)
    return int(hashlib.sha256(text.encode()).digest()[0] % 3 == 0)


@pytest.mark.parametrize("layout", ["sentence-label", "spans"])
def test_plain_layouts_agree_with_an_independent_count(dev, tmp_path, layout):
    caps, ids, log = _log(dev["db"])
    records, by_caption, seen = {}, {}, set()
    sent_counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    cursor: dict = {}
    for row, si, text, action in log:
        key = (ids[row], caps[row])
        start = caps[row].index(text, cursor.get(row, 0))
        cursor[row] = start + len(text)
        lab, flagged = _label(text), action != "keep"
        if layout == "sentence-label":
            records.setdefault((key, si), {"image_id": key[0], "caption": key[1],
                                           "sentence": text, "label": lab})
        else:
            rec = records.setdefault(key, {"image_id": key[0], "caption": key[1], "spans": []})
            if lab and [start + 1, start + 2] not in rec["spans"]:
                rec["spans"].append([start + 1, start + 2])
        if (key, si) not in seen:   # a repeated answer counts once
            seen.add((key, si))
            sent_counts[("tp" if flagged else "fn") if lab else ("fp" if flagged else "tn")] += 1
            old = by_caption.get(key, (0, False))
            by_caption[key] = (old[0] or lab, old[1] or flagged)
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records.values()))
    out = tmp_path / "v.json"
    assert main(["filter", "validate", str(path), "--set", "fsf", "--json", str(out),
                 "--n-boot", "50", "--db", dev["db"]]) == 0
    res = json.loads(out.read_text())
    assert res["layout"] == layout and res["status"] == "ok"
    assert res["sentence"]["counts"] == sent_counts
    cap_counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for lab, fl in by_caption.values():
        cap_counts[("tp" if fl else "fn") if lab else ("fp" if fl else "tn")] += 1
    assert res["caption"]["counts"] == cap_counts and res["caption"]["n"] == 171
    tp, fp, fn = (sent_counts[k] for k in ("tp", "fp", "fn"))
    assert abs(res["sentence"]["precision"] - tp / (tp + fp)) < 1e-6
    assert abs(res["sentence"]["recall"] - tp / (tp + fn)) < 1e-6


@pytest.mark.parametrize("content,message", [
    ('{"image_id": 1, "caption": "a dog", "label": 1}\n' * 12, "no labelled caption matches"),
    ("", "the label file is empty"),
    ('{"foo": 1}\n', "unknown label layout"),
])
def test_bad_labels_exit_2_and_store_nothing(dev, tmp_path, capsys, content, message):
    before = _stored(dev["db"])
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    out = tmp_path / "v.json"
    assert main(["filter", "validate", str(path), "--set", "fsf", "--json", str(out),
                 "--db", dev["db"]]) == 2
    err = capsys.readouterr().err
    assert message in err and "bad.jsonl" in err and "fix:" in err and "Traceback" not in err
    assert _stored(dev["db"]) == before and not out.exists()


def test_conflicting_duplicates_are_refused_unless_told(dev, tmp_path, capsys):
    caps, ids, _ = _log(dev["db"])
    recs = [{"image_id": ids[r], "caption": caps[r], "label": _label(caps[r])}
            for r in sorted(caps)]
    recs.append({**recs[0], "label": 1 - recs[0]["label"]})
    path = tmp_path / "dup.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    before = _stored(dev["db"])
    assert main(["filter", "validate", str(path), "--set", "fsf", "--db", dev["db"]]) == 2
    assert "label the caption of image" in capsys.readouterr().err
    assert _stored(dev["db"]) == before
    out = tmp_path / "v.json"
    assert main(["filter", "validate", str(path), "--set", "fsf", "--conflicts", "skip",
                 "--json", str(out), "--n-boot", "20", "--db", dev["db"]]) == 0
    res = json.loads(out.read_text())
    assert res["matching"]["unmatched"] == {"conflicting-duplicate": 1}
    assert res["status"] == "partial" and res["caption"]["n"] == 170


def test_too_few_matched_is_refused_or_stored_as_too_few(dev, tmp_path, capsys):
    """5 answers of the set plus 20 of no image in it: 5 < 10 matched -> refused, one line
    naming the reasons; with --allow-few stored, status too-few."""
    caps, ids, _ = _log(dev["db"])
    recs = [{"image_id": ids[r], "caption": caps[r], "label": 1} for r in sorted(caps)[:5]]
    recs += [{"image_id": 999_000 + i, "caption": "a dog.", "label": 0} for i in range(20)]
    path = tmp_path / "few.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    before = _stored(dev["db"])
    assert main(["filter", "validate", str(path), "--set", "fsf", "--db", dev["db"]]) == 2
    err = capsys.readouterr().err
    assert "only 5 of 25 labelled captions match the set" in err and "id-absent 20" in err
    assert "row 6" in err and _stored(dev["db"]) == before
    out = tmp_path / "v.json"
    assert main(["filter", "validate", str(path), "--set", "fsf", "--allow-few", "--json",
                 str(out), "--n-boot", "10", "--db", dev["db"]]) == 0
    res = json.loads(out.read_text())
    assert res["status"] == "too-few" and res["caption"]["n"] == 5
    assert res["matching"]["unmatched"] == {"id-absent": 20}
    assert _stored(dev["db"]) == before + 1


def test_an_unfiltered_set_is_refused(dev, capsys):
    assert main(["filter", "validate", str(dev["labels"]), "--set", "fs", "--db",
                 dev["db"]]) == 2
    assert "was not made by filter run" in capsys.readouterr().err


def test_api_card_report_and_show_carry_the_validation(dev, tmp_path, capsys):
    import capaudit

    v = capaudit.open(dev["db"]).validate_filter(dev["labels"], "fsf", n_boot=20, seed=1)
    assert v["caption"]["counts"] == {"tp": 34, "fp": 10, "fn": 44, "tn": 83}
    assert v["status"] == "ok" and v["layout"] == "faithscore"
    capsys.readouterr()
    assert main(["sets", "show", "fsf", "--samples", "0", "--db", dev["db"]]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "validated against human labels `faithscore_annotation.jsonl`" in shown
    assert "status ok" in shown and "precision 0.773" in shown and "(n 44)" in shown
    gt = shared_path("data", "coco2014", "chair_objects_trainval2014.jsonl")
    rep = tmp_path / "rep"
    assert main(["audit", "compare", "fs", "fsf", "--metrics", "chair_s", "--chair-gt", str(gt),
                 "--n-boot", "0", "--report", str(rep), "--db", dev["db"]]) == 0
    text = (rep / "report.md").read_text()
    assert "## Filters against human labels" in text and "recall 0.436" in text
    card = tmp_path / "card.md"
    assert main(["audit", "card", "fs", "fsf", "--metrics", "chair_s", "--chair-gt", str(gt),
                 "--n-boot", "0", "--out", str(card), "--db", dev["db"]]) == 0
    text = card.read_text()
    assert "status ok; 171 of 171 labelled captions matched" in text
    import yaml

    meta = yaml.safe_load(text.split("---")[1])
    v = meta["capaudit_audit"]["sets"]["fsf"]["filter_validations"][0]
    assert v["status"] == "ok" and v["layout"] == "faithscore" and v["matched"] == 171
    assert v["caption"]["counts"] == {"tp": 34, "fp": 10, "fn": 44, "tn": 83}
    assert "filter_validations" not in meta["capaudit_audit"]["sets"]["fs"]


def test_graded_labels_give_spearman(dev, tmp_path):
    """Grades from the real FaithScore facts (5 minus the wrong ones): the more of an answer
    the filter flags, the lower its grade should be."""
    recs = [json.loads(line) for line in dev["labels"].read_text().splitlines()]
    seen, out = set(), []
    for r in recs:
        if (r["id"], r["answer"]) not in seen:
            seen.add((r["id"], r["answer"]))
            out.append({"image_id": r["id"], "caption": r["answer"],
                        "grade": 5 - min(4, list(r["stage 2"].values()).count(0))})
    path = tmp_path / "graded.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    js = tmp_path / "g.json"
    assert main(["filter", "validate", str(path), "--set", "fsf", "--json", str(js),
                 "--n-boot", "100", "--db", dev["db"]]) == 0
    g = json.loads(js.read_text())["graded"]
    assert g["n"] == 171 and g["n_images"] == 30
    assert -1 < g["spearman"] < 0 and g["ci"]["spearman"][0] <= g["spearman"]


def test_a_replaced_or_removed_set_drops_its_validations(dev):
    """Last in this file: it rewrites the fixture's filtered set. A validation speaks of one
    filter run; a new run under the same name must not inherit it."""
    assert main(["filter", "validate", str(dev["labels"]), "--set", "fsf", "--n-boot", "0",
                 "--db", dev["db"]]) == 0
    assert _stored(dev["db"]) >= 1
    gt = shared_path("data", "coco2014", "chair_objects_trainval2014.jsonl")
    assert main(["filter", "run", "fs", "--filter", "hallucination", "--out", "fsf", "--action",
                 "flag", "--object-mode", "reference", "--chair-gt", str(gt), "--replace",
                 "--db", dev["db"]]) == 0
    assert _stored(dev["db"]) == 0
