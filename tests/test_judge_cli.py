"""Judged commands end to end through the CLI against the scripted loopback judge:
50 COCO val2014 images with nic and oscar captions (HAR/MAR and sentence factuality),
the expected numbers derived from the script's rules; bad input is one line, exit 2,
nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capaudit.cli.main import main
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.store import Store
from judge_script import FALSE_WORDS, IRRELEVANT, scripted_answer, words


def _tiny_jpeg(path: Path, seed: int) -> None:
    from PIL import Image

    Image.new("RGB", (8, 8), (seed % 255, 80, 160)).save(path, "JPEG")


@pytest.fixture(scope="module")
def coco50(tmp_path_factory, ):
    """nic, oscar and human captions of the first 50 images all three cover, + images."""
    from conftest import shared_path

    cap = shared_path("data", "captioners")
    coco = json.loads(shared_path("data", "coco2014", "captions_val2014_subset.json").read_text())
    human: dict = {}
    for a in coco["annotations"]:
        human.setdefault(a["image_id"], []).append(a["caption"].strip())
    sets = {n: {json.loads(ln)["image_id"]: json.loads(ln)["caption"].strip()
                for ln in (cap / f"{n}_val2014_gender.jsonl").read_text().splitlines()}
            for n in ("nic", "oscar")}
    ids = sorted(set(human) & set(sets["nic"]) & set(sets["oscar"]))[:50]
    assert len(ids) == 50
    d = tmp_path_factory.mktemp("coco50")
    (d / "img").mkdir()
    for n in ("nic", "oscar"):
        (d / f"{n}.jsonl").write_text("\n".join(json.dumps({"image_id": i, "caption": sets[n][i]})
                                                for i in ids))
    (d / "human.jsonl").write_text("\n".join(json.dumps({"image_id": i, "caption": c})
                                             for i in ids for c in human[i]))
    for i in ids:
        _tiny_jpeg(d / "img" / f"COCO_val2014_{i:012d}.jpg", i)
    return d, ids, {n: [sets[n][i] for i in ids] for n in sets}, {i: human[i] for i in ids}


@pytest.fixture(autouse=True)
def _own_cwd(tmp_path, monkeypatch):
    """The default response cache lives in the user cache dir: one per test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))


def run(*args) -> int:
    return main([str(a) for a in args])


@pytest.mark.slow
def test_factuality_on_50_coco_images_nic_and_oscar(coco50, tmp_path, capsys):
    d, ids, caps, _ = coco50
    db, out = tmp_path / "j.duckdb", tmp_path / "fact.json"
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = run("audit", "factuality", d / "nic.jsonl", d / "oscar.jsonl", "--images", d / "img",
                 "--judge-url", srv.base_url, "--judge-model", "judge-vlm", "--n-boot", 200,
                 "--json", out, "--db", db, "--config", tmp_path / "none.yaml")
    assert rc == 2 and "config file not found" in capsys.readouterr().err  # a typo'd config
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = run("audit", "factuality", d / "nic.jsonl", d / "oscar.jsonl", "--images", d / "img",
                 "--judge-url", srv.base_url, "--judge-model", "judge-vlm", "--n-boot", 200,
                 "--json", out, "--db", db)
    printed = " ".join(capsys.readouterr().out.split())
    assert rc == 0, printed
    res = json.loads(out.read_text())
    from capaudit.judge.factuality import split_sentences

    for name in ("nic", "oscar"):
        sents = [s for c in caps[name] for s in split_sentences(c)]
        bad = sum(any(w in s.lower() for w in FALSE_WORDS) for s in sents)
        v = res["values"][name]
        assert v["factuality.sentence_correct"]["value"] == pytest.approx(1 - bad / len(sents))
        assert v["factuality.sentence_correct"]["n"] == 50
        lo, hi = v["factuality.sentence_correct"]["ci_low"], v["factuality.sentence_correct"]["ci_high"]
        assert lo <= v["factuality.sentence_correct"]["value"] <= hi
    assert res["summary"]["calls"] == srv.calls and res["summary"]["unparsed"] == 0
    w = res["extra"]["welch_caption_share"]
    assert (w["a"], w["b"], w["n_a"], w["n_b"]) == ("nic", "oscar", 50, 50)
    assert "Welch t-test on per-caption share" in printed
    assert "cache hits" in printed and "calls" in printed
    with Store(db, read_only=True) as st:
        n_items = st.one("SELECT count(*) FROM judge_items WHERE kind = 'sentence'")[0]
        assert n_items == sum(len(split_sentences(c)) for n in caps for c in caps[n])
        row = st.one("SELECT judge_model, judge_backend, prompt_hash, evidence FROM judge_items "
                     "LIMIT 1")
        assert row[0] == "judge-vlm" and row[1] == "openai" and len(row[2]) == 12
        extra = json.loads(st.one("SELECT extra FROM metrics WHERE metric = "
                                  "'factuality.sentence_correct' AND set_name = 'nic'")[0])
        assert extra["judge_id"] == res["judge"]["judge_id"]
        assert json.loads(st.one("SELECT params FROM judges")[0])["temperature"] == 0.0
    # the rerun is served from the cache: no new call
    with FakeOpenAIServer(answer=scripted_answer) as srv2:
        assert run("audit", "factuality", d / "nic.jsonl", "--images", d / "img",
                   "--judge-url", srv2.base_url, "--judge-model", "judge-vlm", "--db", db) == 0
    assert srv2.calls == 0


def _har_expected(caps, human):
    """HAR precision/recall of the script's rules, pooled over captions."""
    pn = pd = rn = rd = 0
    for c, refs in zip(caps, human):
        g = [w for w in dict.fromkeys(words(c)) if w not in IRRELEVANT]
        r = [w for w in dict.fromkeys(words(" ".join(refs))) if w not in IRRELEVANT]
        matched = [w for w in g if w in r]
        pn += len(matched) + sum(1 for w in g if w not in r and w not in FALSE_WORDS)
        pd += len(g)
        rn += len([w for w in r if w in g])
        rd += len(r)
    return pn / pd, rn / rd


def _units(caption, refs) -> tuple[list[str], list[str]]:
    """The relevant units of a caption and of its reference (the script's rules)."""
    g = [w for w in dict.fromkeys(words(caption)) if w not in IRRELEVANT]
    r = [w for w in dict.fromkeys(words(" ".join(refs))) if w not in IRRELEVANT]
    return g, r


def _mar_recall_expected(caps, human):
    """MAR (the reference describes, the caption is the reference side): recall is the
    share of the caption's units the human description matches, pooled over captions."""
    matched = total = 0
    for c, refs in zip(caps, human):
        g, r = _units(c, refs)
        matched += len([w for w in g if w in r])
        total += len(g)
    return matched / total


def _har_f1s(caps, human) -> list[float]:
    """Per-caption HAR F1: precision (matched units + unmatched ones verified true) / units,
    recall matched reference units / reference units (each unit matches one at most)."""
    out = []
    for c, refs in zip(caps, human):
        g, r = _units(c, refs)
        p = (len([w for w in g if w in r])
             + len([w for w in g if w not in r and w not in FALSE_WORDS])) / len(g)
        rec = len([w for w in r if w in g]) / len(r)
        out.append(2 * p * rec / (p + rec) if p + rec else 0.0)
    return out


@pytest.mark.slow
def test_dcscore_har_mar_on_50_coco_images(coco50, tmp_path, capsys):
    d, ids, caps, human = coco50
    out = tmp_path / "dc.json"
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = run("audit", "dcscore", d / "nic.jsonl", d / "oscar.jsonl", "--reference",
                 d / "human.jsonl", "--images", d / "img", "--judge-url", srv.base_url,
                 "--judge-model", "judge-vlm", "--n-boot", 100, "--json", out,
                 "--db", tmp_path / "j.duckdb")
    assert rc == 0, capsys.readouterr()
    res = json.loads(out.read_text())
    for name in ("nic", "oscar"):
        p, r = _har_expected(caps[name], [human[i] for i in ids])
        v = res["values"][name]
        assert v["dcscore.har.precision"]["value"] == pytest.approx(p)
        assert v["dcscore.har.recall"]["value"] == pytest.approx(r)
        assert v["dcscore.har.hallucination"]["value"] == pytest.approx(1 - p)
        assert v["dcscore.mar.recall"]["value"] == pytest.approx(_mar_recall_expected(
            caps[name], [human[i] for i in ids]))
        assert v["dcscore.har.hallucination[object]"]["grp"] == "object"
    w = res["extra"]["welch_har_f1"]
    assert w["a"] == "nic" and w["b"] == "oscar" and w["n_a"] == w["n_b"] == 50
    # Welch's test by scipy's own implementation on the per-caption F1 of the script's rules
    from scipy.stats import ttest_ind

    f1 = {n: _har_f1s(caps[n], [human[i] for i in ids]) for n in ("nic", "oscar")}
    want = ttest_ind(f1["nic"], f1["oscar"], equal_var=False)
    assert w["t"] == pytest.approx(want.statistic) and w["p"] == pytest.approx(want.pvalue)


def test_dry_run_makes_no_call_and_stores_nothing(coco50, tmp_path, capsys):
    d, *_ = coco50
    db = tmp_path / "j.duckdb"
    rc = run("audit", "factuality", d / "nic.jsonl", "--images", d / "img", "--judge-url",
             "http://127.0.0.1:9/v1", "--judge-model", "gpt-4o", "--dry-run", "--db", db)
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "dry run" in out and "50 calls" in out, out
    assert "8 assumed per caption (assumed_units)" in out   # the assumption is stated
    import re

    tin, tout, cost = re.search(r"~(\d+) input and ~(\d+) output tokens, estimated cost ([\d.]+)",
                                out).groups()
    assert int(tout) == 50 * 25 and int(tin) > 50 * 765  # 25 answer tokens, 765 per image
    assert float(cost) == pytest.approx(int(tin) * 2.5e-6 + int(tout) * 10e-6, abs=1e-4)  # gpt-4o
    assert not db.exists()


def test_reference_caption_evidence_is_labelled(coco50, tmp_path, capsys):
    d, *_ = coco50
    out = tmp_path / "r.json"
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = run("audit", "factuality", d / "nic.jsonl", "--evidence", "reference-captions",
                 "--reference", d / "human.jsonl", "--limit", 5, "--judge-url", srv.base_url,
                 "--json", out, "--db", tmp_path / "j.duckdb")
    assert rc == 0, capsys.readouterr()
    vals = json.loads(out.read_text())["values"]["nic"]
    assert set(vals) == {f"factuality.{k}@reference-captions" for k in
                         ("response_correct", "sentence_correct", "caption_share")}
    assert "human descriptions" in srv.bodies[0]["messages"][-1]["content"]


@pytest.mark.parametrize("case", ["unknown-judge", "unreachable", "missing-images",
                                  "text-only-with-images", "wrong-label-columns"])
def test_bad_input_one_line_exit_2_nothing_stored(case, coco50, tmp_path, capsys):
    d, ids, *_ = coco50
    db = tmp_path / "j.duckdb"
    base = ["audit", "factuality", d / "nic.jsonl", "--db", db, "--limit", 3]
    if case == "unknown-judge":
        args, msg = base + ["--images", d / "img", "--judge-backend", "openia"], "did you mean"
    elif case == "unreachable":
        quick = tmp_path / "quick.yaml"
        quick.write_text("judge:\n  max_retries: 0\n")
        args, msg = base + ["--images", d / "img", "--judge-url", "http://127.0.0.1:9/v1",
                            "--config", quick], "did not answer"
    elif case == "missing-images":
        args, msg = base + ["--images", tmp_path], "image(s) not found for the VLM judge"
    elif case == "text-only-with-images":
        args, msg = base + ["--images", d / "img", "--judge-backend", "transformers",
                            "--judge-model", "gemma3-270m"], "text-only"
    else:
        labels = tmp_path / "labels.jsonl"
        labels.write_text(json.dumps({"image_id": ids[0], "text": "a dog", "y": 1}) + "\n")
        args, msg = ["judge", "validate", "--labels", labels, "--images", d / "img",
                     "--db", db], "missing column(s) caption, sentence_idx"
    rc = run(*args)
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and err.count("\n") == 1, err
    if db.exists():
        with Store(db, read_only=True) as st:
            assert st.one("SELECT count(*) FROM judge_items")[0] == 0
            assert st.one("SELECT count(*) FROM metrics")[0] == 0
            assert st.one("SELECT count(*) FROM runs")[0] == 0


def test_validate_against_labels_and_a_second_judge(coco50, tmp_path, capsys):
    d, ids, caps, _ = coco50
    from capaudit.judge.factuality import split_sentences

    rows = []  # human labels: 'nic' sentences all factual except those with a surfboard ...
    for src in ("nic", "oscar"):
        for i, c in zip(ids[:20], caps[src][:20]):
            for k, s in enumerate(split_sentences(c)):
                bad = "surfboard" in s.lower() or (src == "oscar" and "table" in s.lower())
                rows.append({"image_id": i, "caption": c, "sentence_idx": k,
                             "label": "no" if bad else "yes", "source": src})
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "v.json"
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = run("judge", "validate", "--labels", labels, "--images", d / "img", "--judge-url",
                 srv.base_url, "--json", out, "--db", tmp_path / "j.duckdb")
    assert rc == 0, capsys.readouterr()
    a = json.loads(out.read_text())["agreement"]
    y = [int(r["label"] == "yes") for r in rows]
    pred = [int(not any(w in split_sentences(r["caption"])[r["sentence_idx"]].lower()
                        for w in FALSE_WORDS)) for r in rows]
    assert a["n"] == len(rows) and a["accuracy"] == pytest.approx(
        sum(p == t for p, t in zip(pred, y)) / len(y))
    # the script answers P(yes) 0.9 for a sentence it judges true, 0.2 for one it judges
    # false: AUC = P(score of a true sentence > score of a false one), ties one half
    score = [0.9 if judged_true else 0.2 for judged_true in pred]
    true = [s for s, label in zip(score, y) if label == 1]
    false = [s for s, label in zip(score, y) if label == 0]
    auc = sum((s > u) + 0.5 * (s == u) for s in true for u in false) / (len(true) * len(false))
    assert a["roc_auc"] == pytest.approx(auc) and a["n_systems"] == 2
    # a second judge's --json output is accepted as labels: agreement with itself is perfect
    fact = tmp_path / "fact.json"
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        assert run("audit", "factuality", d / "nic.jsonl", "--limit", 10, "--images", d / "img",
                   "--judge-url", srv.base_url, "--json", fact, "--db", tmp_path / "j.duckdb") == 0
        assert run("judge", "validate", "--labels", fact, "--images", d / "img", "--judge-url",
                   srv.base_url, "--json", out, "--db", tmp_path / "j.duckdb") == 0
    a = json.loads(out.read_text())["agreement"]
    assert a["accuracy"] == 1.0 and a["n"] >= 10


def test_images_from_shards_reach_the_judge(coco50, tmp_path, capsys):
    import base64

    import pyarrow as pa

    from capaudit.enrich.shards_build import build_shards

    d, ids, caps, _ = coco50
    table = pa.table({"image_key": [None] * 5, "image_id": pa.array(ids[:5], pa.int64()),
                      "caption": caps["nic"][:5]})
    build_shards(d / "img", table, tmp_path / "shards", shard_size=2)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = run("audit", "factuality", d / "nic.jsonl", "--limit", 5, "--shards",
                 tmp_path / "shards", "--judge-url", srv.base_url, "--db", tmp_path / "j.duckdb")
    assert rc == 0, capsys.readouterr()
    sent = {base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
            for b in srv.bodies for p in b["messages"][-1]["content"] if p["type"] == "image_url"}
    assert sent == {(d / "img" / f"COCO_val2014_{i:012d}.jpg").read_bytes() for i in ids[:5]}


def test_faithscore_and_capscore_by_hand(tmp_path, capsys):
    caps = tmp_path / "m.jsonl"
    caps.write_text("\n".join(json.dumps(x) for x in [
        {"image_id": 1, "caption": "A purple horse stands. It is beautiful."},
        {"image_id": 2, "caption": "A horse eats grass."}]))
    refs = tmp_path / "h.jsonl"
    refs.write_text("\n".join(json.dumps(x) for x in [
        {"image_id": 1, "caption": "A brown horse stands."},
        {"image_id": 2, "caption": "A horse eats hay."}]))
    (tmp_path / "img").mkdir()
    for i in (1, 2):
        _tiny_jpeg(tmp_path / "img" / f"{i}.jpg", i)
    out = tmp_path / "f.json"
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        assert run("audit", "faithscore", caps, "--images", tmp_path / "img", "--judge-url",
                   srv.base_url, "--json", out, "--db", tmp_path / "j.duckdb") == 0
        v = json.loads(out.read_text())["values"]["m"]
        # caption 1: facts purple (false), horse, stands; 'It is beautiful.' has no
        # relevant fact (not descriptive) -> 2/3, sentence level 0/1; caption 2: 3/3, 1/1
        assert v["faithscore.faithscore"]["value"] == pytest.approx((2 / 3 + 1) / 2)
        assert v["faithscore.sentence_faithscore"]["value"] == pytest.approx(0.5)
        assert run("audit", "capscore", caps, "--reference", refs, "--judge-url", srv.base_url,
                   "--json", out, "--db", tmp_path / "j.duckdb") == 0
    v = json.loads(out.read_text())["values"]["m"]
    # Jaccard of content words: {purple, horse, stands, beautiful} vs {brown, horse, stands}
    # = 2/5; {horse, eats, grass} vs {horse, eats} = 2/3
    assert v["capscore.overall"]["value"] == pytest.approx((2 / 5 + 2 / 3) / 2)


def test_capped_run_stores_what_was_judged_and_the_rerun_continues(coco50, tmp_path, capsys):
    d, *_ = coco50
    db = tmp_path / "j.duckdb"
    args = ["audit", "factuality", d / "nic.jsonl", "--limit", 6, "--images", d / "img",
            "--db", db, "--json", tmp_path / "f.json"]
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        assert run(*args, "--judge-url", srv.base_url, "--max-calls", 4) == 0
        first = json.loads((tmp_path / "f.json").read_text())["summary"]
        assert first["calls"] == 4 and first["ok"] == 4 and first["not_judged"] >= 2
        assert first["stopped"] == "max-calls 4 reached"
        # every value of the capped run says so: JSON, the stored row, the summary line
        vals = json.loads((tmp_path / "f.json").read_text())["values"]["nic"]
        note = f"capped: {first['not_judged']} units not judged (max-calls 4 reached)"
        assert vals and all(v["status"] == "capped" and v["note"] == note for v in vals.values())
        assert "capped: max-calls 4 reached" in " ".join(capsys.readouterr().out.split())
        with Store(db, read_only=True) as st:
            assert st.one("SELECT status FROM runs")[0] == "capped"
            extra = json.loads(st.one("SELECT extra FROM metrics LIMIT 1")[0])
            assert extra["status"] == "capped" and extra["notes"] == [note]
            assert st.one("SELECT count(*) FROM judge_items WHERE kind = 'sentence' AND "
                          "status = 'ok'")[0] == 4
        assert run(*args, "--judge-url", srv.base_url) == 0
    second = json.loads((tmp_path / "f.json").read_text())["summary"]
    assert second["cache_hits"] == 4 and second["not_judged"] == 0
    assert all("status" not in v for v in
               json.loads((tmp_path / "f.json").read_text())["values"]["nic"].values())
    assert second["calls"] == first["not_judged"] and srv.calls == 4 + second["calls"]


def test_max_cost_counts_estimates_where_the_server_reports_no_usage(coco50, tmp_path, capsys):
    """--max-cost (#21): a server that reports no usage cannot let the run spend past the cap
    (each reply counts its estimate); the JSON, the stored rows and the summary say capped."""
    d, *_ = coco50
    db = tmp_path / "j.duckdb"

    def answer(body):
        reply = scripted_answer(body)
        reply = dict(reply) if isinstance(reply, dict) else {"content": reply}
        return {**reply, "usage": {"total_tokens": None}}

    conf = tmp_path / "judge.yaml"   # one request at a time: the cap is checked every 4 units
    conf.write_text("judge:\n  concurrency: 1\n  model: judge-vlm\n  prices:\n"
                    "    judge-vlm: {input: 1.0, output: 4.0}\n")
    args = ["audit", "factuality", d / "nic.jsonl", "--limit", 6, "--images", d / "img",
            "--db", db, "--json", tmp_path / "f.json", "--config", conf]
    with FakeOpenAIServer(answer=answer) as srv:
        assert run(*args, "--judge-url", srv.base_url, "--dry-run") == 0
        dry = json.loads((tmp_path / "f.json").read_text())["summary"]
        cap = round(dry["est_cost"] / dry["est_calls"] * 5.5, 12)  # about 5 units' worth
        assert run(*args, "--judge-url", srv.base_url, "--max-cost", cap) == 0
    summary = json.loads((tmp_path / "f.json").read_text())["summary"]
    assert summary["stopped"] == f"max-cost {cap} reached" and summary["not_judged"] >= 1
    assert srv.calls == summary["calls"] < dry["est_calls"]
    assert summary["spent"] <= cap
    vals = json.loads((tmp_path / "f.json").read_text())["values"]["nic"]
    note = f"capped: {summary['not_judged']} units not judged (max-cost {cap} reached)"
    assert vals and all(v["status"] == "capped" and v["note"] == note for v in vals.values())
    assert f"capped: max-cost {cap} reached" in " ".join(capsys.readouterr().out.split())
    with Store(db, read_only=True) as st:
        assert st.one("SELECT status FROM runs ORDER BY run_id DESC LIMIT 1")[0] == "capped"


@pytest.mark.parametrize("off", ["off", "false", "'off'", '"Off"'])   # YAML's bool, then text
def test_cache_off_in_the_yaml_keeps_no_answers(off, coco50, tmp_path, capsys):
    """``judge: cache: off`` (docs/judges.md): no response cache file is written and a rerun
    asks again; YAML's ``null`` would be the default (a cache), as for every option."""
    d, *_ = coco50
    conf = tmp_path / "judge.yaml"
    conf.write_text(f"judge:\n  cache: {off}\n")
    args = ["audit", "factuality", d / "nic.jsonl", "--limit", 2, "--images", d / "img",
            "--db", tmp_path / "j.duckdb", "--json", tmp_path / "f.json", "--config", conf]
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        assert run(*args, "--judge-url", srv.base_url) == 0
        first = srv.calls
        assert run(*args, "--judge-url", srv.base_url) == 0
    summary = json.loads((tmp_path / "f.json").read_text())["summary"]
    assert first > 0 and srv.calls == 2 * first and summary["cache_hits"] == 0
    assert not (tmp_path / "cache").exists()


def test_a_cache_setting_that_is_no_path_is_one_line(coco50, tmp_path, capsys):
    d, *_ = coco50
    conf = tmp_path / "judge.yaml"
    conf.write_text("judge:\n  cache: [a, b]\n")
    rc = run("audit", "factuality", d / "nic.jsonl", "--images", d / "img", "--judge-url",
             "http://127.0.0.1:9/v1", "--db", tmp_path / "j.duckdb", "--config", conf)
    err = capsys.readouterr().err
    assert rc == 2 and "judge cache must be default, off or a file path" in err, err
    assert "Traceback" not in err and not (tmp_path / "j.duckdb").exists()


def test_two_targets_of_one_name_are_one_line(coco50, tmp_path, capsys):
    """As ``audit run`` refuses them: a judged run keys its results by set name, so the second
    set's values replaced the first's."""
    d, *_ = coco50
    db = tmp_path / "j.duckdb"
    rc = run("audit", "factuality", d / "nic.jsonl", d / "nic.jsonl", "--images", d / "img",
             "--judge-url", "http://127.0.0.1:9/v1", "--db", db)
    err = capsys.readouterr().err
    assert rc == 2 and "two targets share the name ['nic', 'nic']" in err, err
    assert err.count("\n") == 1
    with Store(db, read_only=True) as st:
        assert st.one("SELECT count(*) FROM runs")[0] == 0
