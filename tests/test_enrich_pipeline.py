"""End to end: sets add -> shards build -> enrich (openai, loopback) -> registered set."""

from __future__ import annotations

import json

import pytest

from capaudit.cli.main import main
from capaudit.enrich.runner import run_enrich
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.store import Store
from test_enrich_fixtures import base_config, make_captions, make_dataset, make_images


def test_cli_shards_build_then_enrich_fusecap_registers_set(tmp_path, capsys):
    ids = make_images(tmp_path / "images", 5)
    make_captions(tmp_path / "caps.json", ids)
    db = str(tmp_path / "t.duckdb")
    assert main(["sets", "add", "coco", str(tmp_path / "caps.json"), "--db", db]) == 0
    assert main(["shards", "build", "--images", str(tmp_path / "images"), "--captions", "coco",
                 "--out", str(tmp_path / "shards"), "--shard-size", "2", "--db", db]) == 0
    assert "5 images in 3 shards" in capsys.readouterr().out
    with FakeOpenAIServer() as srv:
        args = ["enrich", "fusecap", "--shards", str(tmp_path / "shards"), "--out", "coco-fc",
                "--llm", "openai", "--model", "m", "--base-url", srv.base_url,
                "--work-dir", str(tmp_path / "work"), "--db", db]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert srv.calls == 5
        assert "samples/s" in out and "cache hits" in out
        assert main(args) == 0          # rerun: all shards done, nothing requested
        assert srv.calls == 5
    with Store(db) as store:
        info = store.get_set("coco-fc")
        assert (info.n_captions, info.parent, info.format) == (5, "coco", "enrich:fusecap")
        rows = store.sql("SELECT image_id, caption, meta FROM captions WHERE set_id = ? "
                         "ORDER BY row_idx", [info.set_id])
    assert [r[0] for r in rows] == ids
    meta = json.loads(rows[0][2])
    assert rows[0][1].startswith("a thing number 1000 view 0 (fused")
    assert meta["adapter"] == "fusecap" and meta["backend"] == "openai" and meta["model"] == "m"
    assert len(meta["prompt_hash"]["fusecap"]) == 12 and "tags" in meta
    assert meta["source_caption"] == "a thing number 1000 view 0"
    assert (tmp_path / "work" / "provenance.json").exists()


def test_sharegpt4v_and_capsfusion_with_failures_listed(tmp_path):
    import io
    import tarfile

    _, shards, ids = make_dataset(tmp_path, n_images=3, shard_size=3)
    with tarfile.open(shards / "shard-00009.tar", "w") as tf:  # an img2dataset-style sample
        data = b"no image for this one"
        info = tarfile.TarInfo("broken.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    with FakeOpenAIServer() as srv:
        cfg = base_config(srv.base_url)
        s = run_enrich(shards, tmp_path / "w1", "sharegpt4v", cfg)
        assert s["table"].num_rows == 3 and s["samples"] == 4
        assert [f["key"] for f in s["failures"]] == ["broken"]
        assert "no image" in s["failures"][0]["error"]
        assert all("(seen" in c for c in s["table"].column("caption").to_pylist())
        cfg["captions"] = "all"
        s = run_enrich(shards, tmp_path / "w2", "capsfusion", cfg)
        assert s["table"].num_rows == 6   # 3 images x 2 captions, one captioner call each
        assert s["stats"]["requests"] == 3 + 6
        meta = json.loads(s["table"].column("meta")[0].as_py())
        assert meta["synthetic_caption"].startswith("a photo (seen")
        assert meta["captioner"]["model"] == "test-model" and meta["source_index"] == 0
        # the failed shard is retried on a rerun; done shards are not
        again = run_enrich(shards, tmp_path / "w2", "capsfusion", cfg)
        assert again["shards_run"] == 1 and again["shards_skipped"] == 1


def test_prompt_override_changes_hash_and_unknown_placeholder_is_an_error(tmp_path):
    from capaudit.errors import InputError

    _, shards, _ = make_dataset(tmp_path, n_images=2, shard_size=2)
    cfg = base_config(backend="echo")
    a = run_enrich(shards, tmp_path / "w", "fusecap", cfg)
    custom = tmp_path / "p.txt"
    custom.write_text("Caption: {caption}. Objects: {tags}. Text: {ocr}. Improve it.")
    cfg["prompts"] = {"fusecap": str(custom)}
    b = run_enrich(shards, tmp_path / "w", "fusecap", cfg)
    assert b["shards_run"] == 1 and a["config_hash"] != b["config_hash"]
    custom.write_text("Caption: {captoin}")
    cfg["prompts"] = {"fusecap": str(custom)}
    with pytest.raises(InputError, match="captoin"):
        run_enrich(shards, tmp_path / "w3", "fusecap", cfg)


def test_unknown_adapter_and_existing_set_name(tmp_path):
    db, shards, _ = make_dataset(tmp_path, n_images=2, shard_size=2)
    assert main(["enrich", "fusecapp", "--shards", str(shards), "--out", "x", "--db", str(db)]) == 2
    assert main(["enrich", "fusecap", "--shards", str(shards), "--out", "coco", "--llm", "echo",
                 "--work-dir", str(tmp_path / "w"), "--db", str(db)]) == 2
