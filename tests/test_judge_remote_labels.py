"""``judge validate --labels`` where the file lives (i5n): a path or a URL (moto's S3 server
on 127.0.0.1), read once by the driver through the storage layer, as capability's
``--annotations``. It was a typer ``Path``: ``s3://b/k`` became the local ``s3:/b/k``, "labels
file not found". The agreement, verdicts and stored rows are those of the same file on
disk; a bad row or a missing object is one line naming the URL (and the row), exit 2, no
call made."""

from __future__ import annotations

import csv
import io
import json

import pytest

from judged_runs import corpus, run_one
from storage_servers import moto_endpoint, s3  # noqa: F401


def _validate(labels, c: dict, tmp, tag: str, url: str) -> dict:
    from test_judge_steps import own_response_cache

    own_response_cache(tmp, tag)   # each run judges every sentence: equal counts too
    return run_one(["judge", "validate", "--labels", labels, "--images", c["img"]],
                   tmp / f"{tag}.json", tmp / f"{tag}.duckdb", url,
                   ("--config", tmp / "quick.yaml"))


def _as_csv(path) -> bytes:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return out.getvalue().encode()


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_labels_on_s3_give_the_agreement_of_the_local_file(suffix, tmp_path, s3):  # noqa: F811
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    c = corpus(tmp_path / "corpus")
    local = tmp_path / f"labels.{suffix}"
    local.write_bytes(c["labels"].read_bytes() if suffix == "jsonl" else _as_csv(c["labels"]))
    url = s3.put_file(f"in/labels.{suffix}", local)   # the suffix of the URL picks the layout
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        mine = _validate(local, c, tmp_path, "local", srv.base_url)
        remote = _validate(url, c, tmp_path, "remote", srv.base_url)
    assert mine["rc"] == remote["rc"] == 0, remote
    assert remote["result"]["agreement"]["n"] > 0   # sentences of the remote file judged
    for part in ("agreement", "ties", "items", "summary"):
        assert remote["result"][part] == mine["result"][part], part
    for table in ("metrics", "judge_items"):
        assert remote["stored"][table] == mine["stored"][table], table
    assert json.loads(remote["stored"]["run"][1])["labels"] == url   # named by its URL


def _one_line(capsys, tmp_path, labels) -> str:
    from capaudit.cli.main import main
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    c = corpus(tmp_path / "corpus")
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc = main([str(a) for a in ["judge", "validate", "--labels", labels, "--images",
                                    c["img"], "--judge-url", srv.base_url,
                                    "--db", tmp_path / "j.duckdb"]])
        calls = srv.calls
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert calls == 0
    return err


def test_a_missing_remote_labels_file_is_one_line_naming_it(tmp_path, s3, capsys):  # noqa: F811
    err = _one_line(capsys, tmp_path, s3.url("gone.jsonl"))
    assert s3.url("gone.jsonl") in err and "no such file or object" in err, err


def test_a_bad_row_of_remote_labels_is_one_line_naming_the_url_and_row(tmp_path, s3,  # noqa: F811
                                                                       capsys):
    good = {"image_id": 1, "caption": "A horse.", "sentence_idx": 0, "label": "yes"}
    url = s3.put("in/bad.jsonl", (json.dumps(good) + "\n" + json.dumps(
        {**good, "label": "maybe"}) + "\n").encode())
    err = _one_line(capsys, tmp_path, url)
    assert f"{url}, row 2: label 'maybe' is not yes/no" in err, err
