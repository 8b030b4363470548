"""``audit capability --annotations/--qa`` where the files live (i5c): a path, s3:// (moto's
S3 server on 127.0.0.1) or memory://, read once by the driver through the storage layer and
handed to each task as content. The values, verdicts and stored metric rows are those of the
same files on disk, the parts are keyed by the content (not the location), and a missing
remote file is one line naming it, exit 2, no call made, nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judged_runs import ELEMENTS, corpus, run_one
from storage_servers import moto_endpoint, s3  # noqa: F401

QA = [(1, "object", "horse", True), (1, "color", "brown horse", True),
      (3, "object", "cake", True), (4, "object", "ball", False)]


def _files(d: Path) -> dict:
    c = corpus(d)
    (d / "qa.jsonl").write_text("\n".join(json.dumps({"image_id": i, "dimension": k,
                                                      "element": e, "correct": ok})
                                          for i, k, e, ok in QA))
    return {**c, "qa": d / "qa.jsonl"}


def _capability(c: dict, annotations, qa, tmp: Path, tag: str, url: str) -> dict:
    from test_judge_steps import own_response_cache

    own_response_cache(tmp, tag)   # each run judges every unit: equal counts too
    return run_one(["audit", "capability", c["m"], c["n"], "--annotations", annotations,
                    "--qa", qa], tmp / f"{tag}.json", tmp / f"{tag}.duckdb", url,
                   ("--config", tmp / "quick.yaml"))


def _remote_copy(where: str, s3, c: dict) -> tuple[str, str]:
    if where == "s3":
        return s3.put_file("in/el.jsonl", c["el"]), s3.put_file("in/qa.jsonl", c["qa"])
    from capaudit.core.storage.folder import Folder

    folder = Folder("memory://i5c-judge-inputs/in")
    for name in ("el", "qa"):
        folder.write_bytes(f"{name}.jsonl", c[name].read_bytes())
    return folder.url("el.jsonl"), folder.url("qa.jsonl")


@pytest.fixture
def where(request, moto_endpoint, monkeypatch):   # noqa: F811
    """s3 (the moto server, its environment set for this test alone) or memory."""
    if request.param == "s3":
        return request.param, request.getfixturevalue("s3")
    return request.param, None


@pytest.mark.parametrize("where", ["s3", "memory"], indirect=True)
def test_remote_annotations_and_qa_give_the_values_of_local_files(where, tmp_path):
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    kind, store = where
    c = _files(tmp_path / "corpus")
    ann, qa = _remote_copy(kind, store, c)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        local = _capability(c, c["el"], c["qa"], tmp_path, "local", srv.base_url)
        remote = _capability(c, ann, qa, tmp_path, "remote", srv.base_url)
    assert local["rc"] == remote["rc"] == 0
    for part in ("values", "items", "extra", "summary"):
        assert remote["result"][part] == local["result"][part], part
    assert remote["stored"]["metrics"] == local["stored"]["metrics"]
    assert remote["stored"]["judge_items"] == local["stored"]["judge_items"]
    values = remote["result"]["values"]["m"]
    assert values["object.kt_bar"]["n"] >= 1   # the QA file was read from the URL
    judged = {r["text"] for rows in remote["result"]["items"].values() for r in rows}
    assert judged == {e for _, _, e in ELEMENTS}   # every element of the remote file
    config = json.loads(remote["stored"]["run"][1])
    assert config["annotations"] == ann and config["qa"] == qa   # named by their URL


def test_a_part_is_keyed_by_the_content_wherever_the_file_is(tmp_path, s3):
    """The same bytes on disk and on S3: one key, so a rerun from the other place resumes;
    other bytes under the same URL: another key."""
    from capaudit.judge.runner import DEFAULTS, split_run
    from capaudit.judge.step import JudgeStep

    c = _files(tmp_path)

    def key(ann, qa=None) -> str:
        cfg, _ = split_run({**DEFAULTS, "annotations": str(ann), "qa": qa and str(qa)})
        return JudgeStep("capaudit.judge.capability", [], None, cfg, "w").key
    url = s3.put_file("el.jsonl", c["el"])
    assert key(url) == key(c["el"]) != key(c["el"], c["qa"])
    assert key(url, s3.put_file("qa.jsonl", c["qa"])) == key(c["el"], c["qa"])
    s3.put("el.jsonl", c["el"].read_bytes() + b"\n" + json.dumps(
        {"image_id": 2, "dimension": "object", "element": "surfer"}).encode())
    assert key(url) != key(c["el"])


@pytest.mark.parametrize("flag", ["--annotations", "--qa"])
def test_a_missing_remote_file_is_one_line_naming_it(flag, tmp_path, s3, capsys):
    from capaudit.cli.main import main
    from capaudit.enrich.testing import FakeOpenAIServer
    from capaudit.store import Store
    from judge_script import scripted_answer

    c = _files(tmp_path)
    files = {"--annotations": s3.put_file("el.jsonl", c["el"]),
             "--qa": s3.put_file("qa.jsonl", c["qa"]), flag: s3.url("gone.jsonl")}
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = main([str(a) for a in ["audit", "capability", c["m"], "--annotations",
                                    files["--annotations"], "--qa", files["--qa"],
                                    "--judge-url", srv.base_url, "--db", tmp_path / "j.duckdb"]])
        calls = srv.calls
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert s3.url("gone.jsonl") in err and "no such file or object" in err, err
    assert calls == 0
    if (tmp_path / "j.duckdb").exists():
        import gc

        gc.collect()   # the in-process CLI's store, held by the error's frames until then
        with Store(tmp_path / "j.duckdb", read_only=True) as st:
            assert st.one("SELECT count(*) FROM runs")[0] == 0
    assert not (tmp_path / "j.duckdb.work").exists()
