"""Downstream: tiny random BLIP on synthetic shards; train, SIGKILL, resume, caption, amplify.

Everything runs on CPU with one torch thread (the test machine is shared) and no
downloads: the BLIP is built from a config with the packaged MiniLM vocabulary.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

N_IMAGES = 12


def write_shard(path: Path, ids, seed: int = 0, size: int = 40) -> None:
    """A webdataset tar: KEY.jpg (random colour blocks) + KEY.json (image_id, captions)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    with tarfile.open(path, "w") as tf:
        for iid in ids:
            arr = np.kron(rng.integers(0, 255, (4, 4, 3)), np.ones((size // 4, size // 4, 1)))
            buf = io.BytesIO()
            Image.fromarray(arr.astype(np.uint8)).save(buf, format="JPEG")
            meta = json.dumps({"image_id": iid, "captions": ["a photo"]}).encode()
            for ext, data in (("jpg", buf.getvalue()), ("json", meta)):
                info = tarfile.TarInfo(f"{iid:012d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


def caption_for(iid: int) -> str:
    who = "man" if iid % 2 else "woman"
    return f"a {who} riding a horse next to a dog"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    torch.set_num_threads(1)
    from capaudit.store import Store
    from capaudit.train_downstream.tiny import build_tiny_blip

    root = tmp_path_factory.mktemp("downstream")
    shards = root / "shards"
    shards.mkdir()
    write_shard(shards / "000000.tar", range(1, N_IMAGES // 2 + 1), seed=0)
    write_shard(shards / "000001.tar", range(N_IMAGES // 2 + 1, N_IMAGES + 1), seed=1)
    model = build_tiny_blip(root / "tiny", seed=0)
    db = root / "cap.duckdb"
    ids = [i for i in range(1, N_IMAGES + 1) for _ in range(2)] + [999]  # 999: no image
    table = pa.table({"image_key": [str(i) for i in ids], "image_id": pa.array(ids, pa.int64()),
                      "caption": [caption_for(i) for i in ids], "meta": ["{}"] * len(ids)})
    with Store(db) as store:
        store.add_set_from_table("up", table, source="test", format="test")
    return {"root": root, "shards": shards, "model": model, "db": db, "ids": ids,
            "caps": [caption_for(i) for i in ids]}


# settings shared by the reference run, the killed run and the resumed run:
# 25 pairs (24 matched), batch 4 -> 6 micro-batches, accum 2 -> 3 steps/epoch, 2 epochs
TRAIN = dict(epochs=2, batch_size=4, grad_accum=2, lr=1e-3, checkpoint_every=1, log_every=1,
             seed=3)


def test_index_pairs_order_and_preprocessing(env):
    from capaudit.train_downstream.data import (ImagePreprocessor, ShardIndex, epoch_order,
                                                pair_captions)

    index = ShardIndex.build(env["shards"])
    assert len(index) == N_IMAGES and index.order[:2] == [1, 2]
    pairs, missing = pair_captions(env["ids"], env["caps"], index)
    assert len(pairs) == 2 * N_IMAGES and missing == 1
    assert epoch_order(10, 3, 1) == epoch_order(10, 3, 1) != epoch_order(10, 3, 2)
    pre = ImagePreprocessor.from_model_dir(env["model"], 32)
    arr = pre(index.read(5))
    assert arr.shape == (3, 32, 32) and arr.dtype == np.float32 and -3 < arr.mean() < 3


def test_checkpoint_is_atomic(tmp_path):
    torch = pytest.importorskip("torch")
    from capaudit.train_downstream.checkpoint import load_checkpoint, save_checkpoint

    save_checkpoint(tmp_path / "checkpoint.pt", {"step": 7, "w": torch.ones(2)})
    (tmp_path / "checkpoint.pt.tmp-123").write_bytes(b"half a write")  # a killed writer
    state = load_checkpoint(tmp_path)
    assert state["step"] == 7 and not list(tmp_path.glob("*.tmp-*"))


class _Payload:
    """Unpickling this would create a file: a weights-only load must never do it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_checkpoint_needing_a_pickle_is_refused_not_run(tmp_path):
    torch = pytest.importorskip("torch")
    from capaudit.errors import InputError
    from capaudit.train_downstream.checkpoint import load_checkpoint

    marker = tmp_path / "pwned"
    torch.save({"step": 1, "evil": _Payload(marker)}, tmp_path / "checkpoint.pt")
    with pytest.raises(InputError, match="not a capaudit checkpoint"):
        load_checkpoint(tmp_path)
    assert not marker.exists()


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path):
    import random

    torch = pytest.importorskip("torch")
    from capaudit.train_downstream.checkpoint import (load_checkpoint, rng_state,
                                                      save_checkpoint, set_rng_state)

    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    np.random.normal()  # leaves a cached gaussian in NumPy's state
    save_checkpoint(tmp_path / "checkpoint.pt", {"rng": rng_state()})
    want = (random.random(), np.random.normal(), torch.rand(3))
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    set_rng_state(load_checkpoint(tmp_path)["rng"])
    got = (random.random(), np.random.normal(), torch.rand(3))
    assert got[0] == want[0] and got[1] == want[1] and torch.equal(got[2], want[2])


def _kill_mid_training(env, out: Path) -> int:
    """Start training in a real subprocess, SIGKILL it after its 2nd checkpoint."""
    marker = out.parent / "steps.txt"
    script = textwrap.dedent(f"""
        import time, torch
        torch.set_num_threads(1)
        from capaudit.train_downstream.train import TrainConfig, train_downstream
        def on_step(info):
            open({str(marker)!r}, "a").write(f"{{info['step']}}\\n")
            time.sleep(0.5)   # slow steps so the kill lands mid-run
        train_downstream({env['ids']!r}, {env['caps']!r}, {str(env['shards'])!r},
                         {str(env['model'])!r}, {str(out)!r}, TrainConfig(**{TRAIN!r}),
                         set_name="up", on_step=on_step)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 90
    try:
        while time.time() < deadline:
            if marker.exists() and len(marker.read_text().split()) >= 2:
                break
            if proc.poll() is not None:
                pytest.fail(f"training subprocess ended early: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
        else:
            pytest.fail("training subprocess made no progress")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return int(marker.read_text().split()[-1])


def test_train_kill_resume_caption_amplify(env):
    import torch
    from typer import Typer
    from typer.testing import CliRunner

    from capaudit.cli.downstream import amplification_command
    from capaudit.cli.main import main
    from capaudit.store import Store
    from capaudit.train_downstream.checkpoint import load_checkpoint
    from capaudit.train_downstream.train import TrainConfig, train_downstream

    # an uninterrupted reference run
    ref = train_downstream(env["ids"], env["caps"], env["shards"], env["model"],
                           env["root"] / "ref", TrainConfig(**TRAIN), set_name="up")
    assert ref["steps"] == 6 and ref["pairs"] == 24 and ref["unmatched_captions"] == 1
    log = [json.loads(x) for x in (env["root"] / "ref" / "train_log.jsonl").read_text().split("\n") if x]
    assert len(log) == 6 and all(r["samples_per_s"] > 0 and r["peak_mem_mb"] > 0 for r in log)

    # killed mid-run, then resumed through the CLI to the same final step and weights
    run = env["root"] / "run"
    killed_at = _kill_mid_training(env, run)
    ckpt = load_checkpoint(run)
    assert 2 <= ckpt["step"] < 6 and not (run / "model").exists()
    args = ["train-downstream", "up", "--shards", str(env["shards"]), "--model", str(env["model"]),
            "--out", str(run), "--db", str(env["db"])]
    for key, value in TRAIN.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    assert main(args) == 0
    done = json.loads((run / "done.json").read_text())
    assert done["steps"] == 6 and done["resumed_from_step"] >= min(killed_at, 2)
    assert json.loads((run / "provenance.json").read_text())["seed"] == 3
    a = torch.load(run / "checkpoint.pt", weights_only=False)["model"]
    b = torch.load(env["root"] / "ref" / "checkpoint.pt", weights_only=False)["model"]
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a), "resume diverged"
    # changed settings on an existing run are refused with a one-line error (exit 2)
    assert main(args[:-2] + ["--seed", "4"]) == 2

    # caption held-out images (greedy, short) and register them as a set
    assert main(["caption", "--model", str(run), "--shards", str(env["shards"]), "--out", "down",
                 "--beams", "1", "--max-length", "6", "--min-length", "1", "--batch-size", "8",
                 "--db", str(env["db"])]) == 0
    with Store(env["db"]) as store:
        info = store.get_set("down")
        assert info.n_captions == N_IMAGES and info.parent == "up"
        assert info.meta["beams"] == 1 and info.meta["training"]["steps"] == 6
        down = store.captions("down").to_pydict()
        # one caption per held-out image, generated within --max-length 6 wordpieces
        assert len(set(down["image_id"])) == N_IMAGES and None not in down["image_id"]
        assert all(isinstance(c, str) and len(c.split()) <= 6 for c in down["caption"])
        # stand-ins for stored `audit run` results of both sets
        for name, value, lo, hi in (("up", 0.10, 0.08, 0.12), ("down", 0.16, 0.13, 0.20)):
            store.write_metric(1, name, "chair_i", value, 24, lo, hi)
        store.write_metric(1, "up", "recall", 0.5, 24, None, None)

    app = Typer()
    app.command("amplification")(amplification_command)
    app.command("noop")(lambda: None)
    report = env["root"] / "amp.md"
    res = CliRunner().invoke(app, ["amplification", "--upstream", "up", "--downstream", "down",
                                   "--db", str(env["db"]), "--report", str(report)])
    assert res.exit_code == 0, res.output
    assert "chair_i" in res.output and "0.06 " in res.output  # 2 decimals, as compare
    assert "| chair_i ↓ | 0.100 | 0.160 | 0.060 |" in report.read_text()  # ↓: lower is better
    with Store(env["db"]) as store:
        row = store.one("SELECT value, extra FROM metrics WHERE metric = 'amplification.chair_i'")
        assert row[0] == pytest.approx(0.06) and json.loads(row[1])["upstream_set"] == "up"

    # with annotation files, both sets are audited now by the engine
    pytest.importorskip("capaudit.audit.runner")
    inst, gt = env["root"] / "inst.jsonl", env["root"] / "gt.jsonl"
    inst.write_text("".join(json.dumps({"image_id": i, "categories": ["person", "horse"]}) + "\n"
                            for i in range(1, N_IMAGES + 1)))
    gt.write_text("".join(json.dumps({"image_id": i, "objects": ["person", "horse"]}) + "\n"
                          for i in range(1, N_IMAGES + 1)))
    res = CliRunner().invoke(app, ["amplification", "--upstream", "up", "--downstream", "down",
                                   "--db", str(env["db"]), "--instances", str(inst),
                                   "--chair-gt", str(gt), "--metrics", "chair_i,recall,length",
                                   "--json", str(env["root"] / "amp.json")])
    assert res.exit_code == 0, res.output
    rows = {r["metric"]: r for r in json.loads((env["root"] / "amp.json").read_text())}
    assert rows["length"]["upstream"] == pytest.approx(9.0)
    assert rows["chair_i"]["upstream"] >= 100 / 3 - 0.01  # "dog" is never in the ground truth
    for r in rows.values():
        if r["downstream"] is not None:
            assert r["delta"] == pytest.approx(r["downstream"] - r["upstream"])

    # audit compare shows the same Table 2 view for a downstream set and its training set
    from capaudit.cli.main import main as cli_main
    rep = env["root"] / "cmp"
    assert cli_main(["audit", "compare", "up", "down", "--instances", str(inst), "--chair-gt",
                     str(gt), "--metrics", "chair_i,recall,length", "--n-boot", "50",
                     "--report", str(rep), "--db", str(env["db"])]) == 0
    md = (rep / "report.md").read_text()
    assert "## Amplification: down (downstream) - up (upstream)" in md
    line = next(l for l in md.splitlines() if l.startswith("| length |"))
    assert float(line.split("|")[4]) == pytest.approx(rows["length"]["delta"], abs=1e-3)


def test_amplification_intervals():
    from capaudit.audit.amplification import Stat, amplification

    up = {"chair_i": Stat(0.10, 100, 0.08, 0.12), "len": Stat(10.0, 100)}
    down = {"chair_i": Stat(0.16, 100, 0.13, 0.20), "len": Stat(9.0, 100, 8.5, 9.5)}
    rows = {r.metric: r for r in amplification(up, down)}
    r = rows["chair_i"]
    assert r.delta == pytest.approx(0.06) and r.method == "independent"
    assert r.ci_low == pytest.approx(0.06 - (0.03**2 + 0.02**2) ** 0.5)
    assert r.ci_high == pytest.approx(0.06 + (0.04**2 + 0.02**2) ** 0.5)
    assert rows["len"].delta == -1.0 and rows["len"].method == "none"
    # paired bootstrap: a constant per-image shift has a degenerate interval at the shift
    rng = np.random.default_rng(0)
    base = rng.random(200)
    per_up = {i: (base[i], 1.0) for i in range(200)}
    per_down = {i: (base[i] + 0.05, 1.0) for i in range(200)}
    rows = amplification(up, down, per_image={"chair_i": (per_up, per_down)}, n_boot=300)
    r = rows[0]
    assert r.method == "paired-bootstrap"
    assert r.ci_low == pytest.approx(0.05) and r.ci_high == pytest.approx(0.05)


@pytest.mark.gpu
def test_small_blip_trains_on_gpu(env, tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from capaudit.train_downstream.tiny import build_tiny_blip
    from capaudit.train_downstream.train import TrainConfig, train_downstream

    model = build_tiny_blip(tmp_path / "small", size="small")
    s = train_downstream(env["ids"], env["caps"], env["shards"], model, tmp_path / "run",
                         TrainConfig(epochs=1, batch_size=8, lr=1e-4), set_name="up")
    assert s["device"].startswith("cuda") and s["steps"] == 3
