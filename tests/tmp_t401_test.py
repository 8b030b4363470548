import json
from test_hostile_judges import _files, KEY
from capaudit.cli.main import main
from capaudit.enrich.testing import FakeOpenAIServer
import pytest

@pytest.mark.parametrize("name", ["capability", "validate"])
def test_x(tmp_path, capsys, name):
    caps, refs = _files(tmp_path)
    if name == "capability":
        ann = tmp_path / "el.jsonl"
        ann.write_text("".join(json.dumps({"image_id": i, "dimension": "object_color", "element": "the horse is brown"}) + "\n" for i in (1, 2)))
        args = ["audit", "capability", caps, "--annotations", ann, "--images", tmp_path / "img"]
    else:
        lab = tmp_path / "labels.jsonl"
        lab.write_text("".join(json.dumps({"image_id": i, "caption": "A horse eats grass.", "sentence_idx": 0, "label": "yes"}) + "\n" for i in (1, 2)))
        args = ["judge", "validate", "--labels", lab, "--images", tmp_path / "img"]
    with FakeOpenAIServer(answer=lambda b: {"echo_headers": True, "status": 401}) as srv:
        code = main([str(a) for a in args + ["--judge-url", srv.base_url, "--api-key-env", "JUDGE_KEY", "--n-boot", 10, "--db", tmp_path / "j.duckdb"]])
    err = capsys.readouterr().err
    print(err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "HTTP 401" in lines[0], err
    assert KEY not in err and "sk-test" not in err and "[redacted]" in err, err
