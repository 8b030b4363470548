"""Fine-tuning speed options (#45): SDPA attention equal to eager, the runtime plan and its
notes, bf16 weights with fp32 masters, token-weighted gradient accumulation, today's
numbers kept by the defaults, and the benchmark's code path.

Everything runs on CPU with one torch thread and a tiny BLIP built from a config (no
downloads); the GPU-only branches are exercised through their decisions (a faked device)
and, where a real GPU is needed, marked ``gpu``.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_downstream import write_shard  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-5


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _tiny_pair():
    from capaudit.train_downstream.attention import sdpa_supported, use_attention
    from capaudit.train_downstream.tiny import tiny_config

    if not sdpa_supported():
        pytest.skip("the SDPA forwards mirror transformers 5's BLIP attention")

    torch.manual_seed(0)
    eager = transformers.BlipForConditionalGeneration(tiny_config("tiny")).train()
    with torch.no_grad():  # BLIP's vision init (std 1e-10) would make any attention look equal
        for p in eager.parameters():
            p.normal_(0.0, 0.2)
    return eager, use_attention(copy.deepcopy(eager), "sdpa")


def _max_diff(a, b) -> float:
    return float((a - b).abs().max())


def test_sdpa_module_by_module_outputs_and_gradients():
    """Vision self-attention (no mask), text causal self-attention with padding and text
    cross-attention, each module against its eager twin: outputs and input/weight grads."""
    from transformers.masking_utils import create_causal_mask

    eager, sdpa = _tiny_pair()
    vis_e = eager.vision_model.encoder.layers[0].self_attn
    vis_s = sdpa.vision_model.encoder.layers[0].self_attn
    layer_e, layer_s = eager.text_decoder.bert.encoder.layer[1], sdpa.text_decoder.bert.encoder.layer[1]
    hidden = torch.randn(3, 7, 32)
    image = torch.randn(3, 17, 32)
    pad = torch.ones(3, 7, dtype=torch.long)
    pad[1, 4:], pad[2, 6:] = 0, 0
    causal = create_causal_mask(config=eager.text_decoder.config, inputs_embeds=hidden,
                                attention_mask=pad, cache=None)
    assert causal is not None and causal.shape == (3, 1, 7, 7)
    cases = {
        "vision": (vis_e, vis_s, lambda m, x: m(x)[0], torch.randn(3, 17, 32)),
        "text-self": (layer_e.attention.self, layer_s.attention.self,
                      lambda m, x: m(x, attention_mask=causal)[0], hidden),
        "text-cross": (layer_e.crossattention.self, layer_s.crossattention.self,
                       lambda m, x: m(x, encoder_hidden_states=image)[0], hidden),
    }
    for name, (mod_e, mod_s, call, x) in cases.items():
        outs, grads = [], []
        weights = None  # a fixed random projection of the output: gradients of order 1
        for mod in (mod_e, mod_s):
            xi = x.clone().requires_grad_(True)
            out = call(mod, xi)
            if weights is None:
                weights = torch.randn_like(out) / out.numel() ** 0.5
            (out * weights).sum().backward()
            outs.append(out.detach())
            grads.append([xi.grad] + [p.grad.clone() for p in mod.parameters()])
            mod.zero_grad()
        assert type(mod_s).__name__.startswith("Sdpa") and not type(mod_e).__name__.startswith("Sdpa")
        diffs = (_max_diff(*outs), max(_max_diff(a, b) for a, b in zip(*grads)))
        print(f"{name}: max |sdpa - eager| output {diffs[0]:.2e}, gradients {diffs[1]:.2e}")
        assert diffs[0] < TOL and diffs[1] < TOL, name
        # outputs of order 1: a wrong scale or a dropped mask would be far outside TOL
        assert outs[0].abs().max() > 0.1 and _max_diff(outs[0], outs[0] * 1.01) > 100 * TOL


def test_sdpa_whole_model_loss_logits_gradients_and_generation():
    eager, sdpa = _tiny_pair()
    pixels = torch.randn(3, 3, 32, 32)
    ids = torch.randint(1000, 2000, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 5:], mask[2, 7:] = 0, 0
    labels = ids.masked_fill(mask == 0, -100)
    got = []
    for net in (eager, sdpa):
        out = net(pixel_values=pixels, input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        got.append((out.loss.detach(), out.logits.detach(),
                    {n: p.grad for n, p in net.named_parameters() if p.grad is not None}))
    (loss_e, logits_e, grads_e), (loss_s, logits_s, grads_s) = got
    assert grads_e.keys() == grads_s.keys() and len(grads_e) > 50
    grad_diff = max(_max_diff(grads_e[k], grads_s[k]) for k in grads_e)
    print(f"model: loss {float(loss_e - loss_s):.2e}, logits {_max_diff(logits_e, logits_s):.2e}, "
          f"gradients {grad_diff:.2e} (largest gradient {max(g.abs().max() for g in grads_e.values()):.2e})")
    assert abs(float(loss_e - loss_s)) < TOL and _max_diff(logits_e, logits_s) < TOL
    assert grad_diff < TOL
    eager.eval(), sdpa.eval()
    with torch.no_grad():  # beam search through the key/value cache: the same tokens
        a = eager.generate(pixel_values=pixels, num_beams=2, max_length=8)
        b = sdpa.generate(pixel_values=pixels, num_beams=2, max_length=8)
    assert torch.equal(a, b)


def test_use_attention_keeps_weights_and_swaps_back():
    from capaudit.errors import InputError
    from capaudit.train_downstream.attention import attention_kind, use_attention

    eager, sdpa = _tiny_pair()
    assert attention_kind(eager) == "eager" and attention_kind(sdpa) == "sdpa"
    a, b = eager.state_dict(), sdpa.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert attention_kind(use_attention(sdpa, "eager")) == "eager"
    with pytest.raises(InputError, match="unknown attention"):
        use_attention(eager, "flash")


def test_plan_on_cpu_keeps_todays_path_and_says_what_it_changes():
    from capaudit.errors import InputError
    from capaudit.train_downstream.runtime import DeviceCaps, plan_runtime

    cpu = DeviceCaps("cpu", bf16=True, name="cpu", cpu_count=16)
    plan = plan_runtime(cpu)
    assert (plan.precision, plan.weights, plan.autocast, plan.attention, plan.compile,
            plan.fused_adamw, plan.workers, plan.pin_memory, plan.notes) == (
        "fp32", "fp32", None, "eager", False, False, 0, False, ())
    for asked in ("bf16", "fp16"):
        plan = plan_runtime(cpu, precision=asked)
        assert plan.precision == "fp32" and plan.precision_requested == asked
        assert len(plan.notes) == 1 and f"--precision {asked}" in plan.notes[0] and "fp32" in plan.notes[0]
    plan = plan_runtime(cpu, attention="sdpa", compile=True, workers=3)
    assert (plan.attention, plan.compile, plan.workers) == ("sdpa", True, 3)
    with pytest.raises(InputError, match="unknown precision"):
        plan_runtime(cpu, precision="int8")
    with pytest.raises(InputError, match="unknown attention"):
        plan_runtime(cpu, attention="flash")


def test_plan_on_a_faked_gpu():
    from capaudit.train_downstream.runtime import DeviceCaps, plan_runtime

    h100 = DeviceCaps("cuda", bf16=True, name="NVIDIA H100 80GB HBM3", cpu_count=16)
    plan = plan_runtime(h100)
    assert (plan.precision, plan.weights, plan.autocast, plan.grad_scaler, plan.attention,
            plan.compile, plan.fused_adamw, plan.workers, plan.pin_memory) == (
        "bf16", "bf16", "bf16", False, "sdpa", True, True, 8, True)
    assert plan_runtime(DeviceCaps("cuda", True, "x", 4)).workers == 4
    fp16 = plan_runtime(h100, precision="fp16")
    assert (fp16.weights, fp16.autocast, fp16.grad_scaler) == ("fp32", "fp16", True)
    v100 = DeviceCaps("cuda", bf16=False, name="Tesla V100-SXM2-32GB", cpu_count=8)
    assert plan_runtime(v100).precision == "fp32" and plan_runtime(v100).notes == ()
    plan = plan_runtime(v100, precision="bf16")
    assert plan.precision == "fp32" and "V100" in plan.notes[0]
    old_transformers = plan_runtime(h100, sdpa_available=False)
    assert old_transformers.attention == "eager" and "transformers >= 5" in old_transformers.notes[0]
    manual = plan_runtime(h100, attention="eager", compile=False, precision="fp32", workers=0)
    assert (manual.attention, manual.compile, manual.weights, manual.workers) == (
        "eager", False, "fp32", 0)


def test_master_weights_keep_steps_bf16_would_round_away():
    from capaudit.train_downstream.optim import build_optimizer

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    with torch.no_grad():
        net[0].weight.fill_(0.02)
    before = net[0].weight.detach().clone()
    opt, masters = build_optimizer(torch, net, lr=1e-5, weight_decay=0.05, weights="bf16",
                                   fused=False)
    assert net[0].weight.dtype == torch.bfloat16 and masters.params[0].dtype == torch.float32
    assert [len(g["params"]) for g in opt.param_groups] == [1, 3]  # decay: the Linear weight
    for _ in range(3):
        net(torch.randn(4, 8, dtype=torch.bfloat16)).sum().backward()
        masters.grads_to_master()
        opt.step()
        masters.master_to_model()
        opt.zero_grad()
    moved = float((masters.params[0].detach() - before).abs().max())
    assert 1e-5 < moved < 1e-4                                  # three lr-1e-5 steps kept
    assert torch.equal(net[0].weight, before.to(torch.bfloat16))  # bf16 alone lost them all
    state = masters.state_dict()
    assert state["0.weight"].dtype == torch.float32
    # a resume: a fresh bf16 model and masters read the checkpoint's fp32 values exactly
    twin = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    _, twin_masters = build_optimizer(torch, twin, lr=1e-5, weight_decay=0.05, weights="bf16",
                                      fused=False)
    twin_masters.load_state_dict(state)
    assert torch.equal(twin_masters.params[0], masters.params[0])
    assert torch.equal(twin[0].weight, net[0].weight)
    masters.export_fp32()
    assert net[0].weight.dtype == torch.float32 and torch.equal(net[0].weight, state["0.weight"])


def _env(tmp_path, captions):
    from capaudit.train_downstream.tiny import build_tiny_blip

    shards = tmp_path / "shards"
    shards.mkdir()
    write_shard(shards / "000000.tar", range(1, len(captions) + 1), seed=0)
    return shards, build_tiny_blip(tmp_path / "tiny", seed=0)


WORDS = ["dog", "red horse", "small brown dog on a road", "cat",
         "big white boat near the shore today"]


def test_defaults_keep_todays_numbers(tmp_path):
    """A seeded tiny run with every default: the loss trajectory, the trained weights and
    the captions computed by main's code before #45 (commit 1866729), on CPU."""
    from capaudit.train_downstream.caption import generate_captions
    from capaudit.train_downstream.train import TrainConfig, train_downstream

    caps = [f"a man with a {WORDS[i % 5]}" for i in range(1, 9)]
    shards, model = _env(tmp_path, caps)
    run = tmp_path / "run"
    train_downstream(list(range(1, 9)), caps, shards, model, run,
                     TrainConfig(epochs=2, batch_size=4, lr=1e-3, log_every=1,
                                 checkpoint_every=100, seed=3), set_name="up")
    losses = [json.loads(x)["loss"] for x in (run / "train_log.jsonl").read_text().splitlines()]
    assert losses == pytest.approx([10.37332534790039, 10.25797176361084, 10.180261611938477,
                                    10.144174575805664], rel=1e-6)
    state = torch.load(run / "checkpoint.pt", weights_only=True)["model"]
    # tolerances: another CPU's vector width may reorder float sums (~1e-10 here: the SDPA
    # path, the same function, lands 1e-10 away); any change of the update rule is far more
    assert sum(float(v.double().abs().sum()) for v in state.values()) == pytest.approx(
        32342.36206557108, rel=1e-8)
    runtime = json.loads((run / "runtime.json").read_text())
    assert (runtime["precision"], runtime["attention"], runtime["compile"]) == ("fp32", "eager", False)
    out = generate_captions(run, shards, num_beams=2, max_length=8, min_length=2, batch_size=4)
    assert set(out.column("caption").to_pylist()) == {
        "blink completion [unused256]aan huron dorian invites"}


def _final_weights(shards, model, out, caps, **cfg):
    from capaudit.train_downstream.train import TrainConfig, train_downstream

    train_downstream(list(range(1, len(caps) + 1)), caps, shards, model, out,
                     TrainConfig(epochs=2, lr=1e-4, seed=1, checkpoint_every=100, **cfg),
                     set_name="s")
    return torch.load(out / "checkpoint.pt", weights_only=True)["model"]


def test_grad_accumulation_equals_one_big_batch(tmp_path):
    """k micro-batches of b make the same steps as one batch of k*b, captions of unequal
    length included (each micro-batch weighted by its tokens), at fp32."""
    caps = [f"a {WORDS[(i * 3) % 5]} and a {WORDS[i % 5]}" for i in range(1, 13)]
    shards, model = _env(tmp_path, caps)
    big = _final_weights(shards, model, tmp_path / "big", caps, batch_size=6)
    for k in (2, 3):
        acc = _final_weights(shards, model, tmp_path / f"acc{k}", caps, batch_size=6 // k,
                             grad_accum=k)
        diff = max(_max_diff(big[n], acc[n]) for n in big if big[n].is_floating_point())
        print(f"grad_accum {k}: max |weights - one batch's| {diff:.2e}")
        assert diff < 2e-6  # equal weights per micro-batch (the old rule) miss by ~4e-4


def test_cli_says_when_cpu_runs_fp32_and_records_it(tmp_path):
    pa = pytest.importorskip("pyarrow")
    from typer.testing import CliRunner

    from capaudit.cli.main import app
    from capaudit.store import Store

    caps = [f"a man with a {WORDS[i % 5]}" for i in range(1, 5)]
    shards, model = _env(tmp_path, caps)
    db = tmp_path / "c.duckdb"
    with Store(db) as store:
        store.add_set_from_table("s", pa.table({
            "image_key": [str(i) for i in range(1, 5)], "image_id": pa.array(range(1, 5), pa.int64()),
            "caption": caps, "meta": ["{}"] * 4}), source="t", format="t")
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["train-downstream", "s", "--shards", str(shards), "--model",
                                   str(model), "--out", str(run), "--epochs", "1",
                                   "--batch-size", "2", "--precision", "bf16", "--attention",
                                   "sdpa", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "--precision bf16 asked for on cpu: this run uses fp32" in res.output
    done = json.loads((run / "done.json").read_text())
    assert done["precision"] == "fp32" and done["runtime"]["precision_requested"] == "bf16"
    assert done["runtime"]["attention"] == "sdpa"
    prov = json.loads((run / "provenance.json").read_text())
    assert prov["config"]["runtime"]["precision"] == "fp32"


def test_bf16_master_path_trains_on_cpu(tmp_path, monkeypatch):
    """The GPU plan's bf16 branch (bf16 weights, fp32 masters, bf16 autocast, SDPA) forced
    on CPU: it trains, checkpoints fp32 masters and exports an fp32 model."""
    import dataclasses

    from capaudit.train_downstream import train as train_mod
    from capaudit.train_downstream.runtime import DeviceCaps, plan_runtime

    gpu_plan = plan_runtime(DeviceCaps("cuda", True, "fake", 1), compile=False)
    monkeypatch.setattr(train_mod, "runtime_plan", lambda cfg, device=None: dataclasses.replace(
        gpu_plan, workers=0, pin_memory=False, fused_adamw=False))
    caps = [f"a man with a {WORDS[i % 5]}" for i in range(1, 9)]
    shards, model = _env(tmp_path, caps)
    state = _final_weights(shards, model, tmp_path / "bf16", caps, batch_size=2, grad_accum=2)
    assert all(v.dtype == torch.float32 for v in state.values() if v.is_floating_point())
    done = json.loads((tmp_path / "bf16" / "done.json").read_text())
    assert done["precision"] == "bf16" and done["runtime"]["weights"] == "bf16"
    exported = transformers.BlipForConditionalGeneration.from_pretrained(tmp_path / "bf16" / "model")
    assert exported.dtype == torch.float32
    for name, p in exported.named_parameters():
        assert torch.equal(p, state[name]), name

    # stopped after step 2 and resumed: the masters come back from the checkpoint and the
    # run ends where the uninterrupted one did
    from capaudit.train_downstream.train import TrainConfig, train_downstream

    class Stop(Exception):
        pass

    def stop_at_2(info):
        if info["step"] == 2:
            raise Stop

    cfg = dict(epochs=2, lr=1e-4, seed=1, batch_size=2, grad_accum=2, checkpoint_every=1)
    run = tmp_path / "resumed"
    with pytest.raises(Stop):
        train_downstream(list(range(1, 9)), caps, shards, model, run, TrainConfig(**cfg),
                         set_name="s", on_step=stop_at_2)
    done = train_downstream(list(range(1, 9)), caps, shards, model, run, TrainConfig(**cfg),
                            set_name="s")
    assert done["resumed_from_step"] == 2 and done["steps"] == 4  # 8 pairs / (2 x 2), 2 epochs
    resumed = torch.load(run / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(resumed[k], state[k]) for k in state)


def test_benchmark_runs_on_cpu_and_prints_one_table(capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_train

    rows = bench_train.main(["--batch-sizes", "2,4", "--steps", "1", "--warmup", "0",
                             "--images", "4", "--device", "cpu"])
    assert [(r["batch"], r["attention"]) for r in rows] == [
        (2, "eager"), (2, "sdpa"), (4, "eager"), (4, "sdpa")]
    assert all("error" not in r and r["samples_per_s"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert out.count("| 2 | eager | fp32 | off |") == 1 and "n/a |" in out
    assert bench_train.peak_tflops("NVIDIA H200") == 989.0
    assert bench_train.peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert bench_train.peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert bench_train.peak_tflops("Tesla T4") is None


def test_flops_estimate_of_blip_base_by_hand():
    """BLIP base at 384 px, 20 caption tokens: 6 x (86M vision weights x 577 tokens + ...)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_train

    from capaudit.train_downstream.tiny import tiny_config

    with torch.device("meta"):
        net = transformers.BlipForConditionalGeneration(tiny_config("base"))
    d, n_img, t = 768, 577, 20
    layer = 4 * d * d + 2 * 4 * d * d              # attention projections + MLP weights
    vision = 12 * layer + 3 * 16 * 16 * d          # + the patch embedding
    text = 12 * (layer + 2 * d * d) + 30524 * d    # + cross-attention q/o, + LM head (tied)
    kv = 12 * 2 * d * d                            # cross-attention keys/values of the image
    text += d * d                                  # the LM head's transform
    by_hand = 6 * (vision * n_img + kv * n_img + text * t) + 12 * 12 * d * (
        n_img * n_img + t * t + t * n_img)
    assert bench_train.flops_per_sample(net, t) == pytest.approx(by_hand, rel=1e-3)


@pytest.mark.gpu
def test_gpu_plan_trains_and_sdpa_matches_on_cuda(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from capaudit.train_downstream.runtime import DeviceCaps

    caps = DeviceCaps.of(torch.device("cuda"))
    eager, sdpa = _tiny_pair()
    eager, sdpa = eager.cuda(), sdpa.cuda()
    x = torch.randn(2, 3, 32, 32, device="cuda")
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        assert _max_diff(eager.vision_model(x).last_hidden_state,
                         sdpa.vision_model(x).last_hidden_state) < 1e-4
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    caption_list = [f"a man with a {WORDS[i % 5]}" for i in range(1, 9)]
    shards, model = _env(tmp_path, caption_list)
    state = _final_weights(shards, model, tmp_path / "gpu", caption_list, batch_size=4,
                           device="cuda")
    done = json.loads((tmp_path / "gpu" / "done.json").read_text())
    assert done["runtime"]["precision"] == ("bf16" if caps.bf16 else "fp32")
    assert done["runtime"]["fused_adamw"] and done["peak_mem_mb"] > 0
    assert all(v.dtype == torch.float32 for v in state.values() if v.is_floating_point())


def test_compiled_forward_trains_like_the_plain_one(tmp_path, monkeypatch):
    """``--compile`` through TorchDynamo (its ``eager`` backend: no C++ toolchain needed in
    CI; on a GPU the default inductor backend runs): batches padded to a multiple of 8
    tokens, and the same training as the uncompiled forward."""
    calls = []
    real_compile = torch.compile

    def compile_eager(model, **kwargs):
        calls.append(type(model).__name__)
        return real_compile(model, backend="eager", **kwargs)

    monkeypatch.setattr(torch, "compile", compile_eager)
    caps = [f"a man with a {WORDS[i % 5]}" for i in range(1, 9)]
    shards, model = _env(tmp_path, caps)
    plain = _final_weights(shards, model, tmp_path / "plain", caps, batch_size=4,
                           attention="sdpa")
    compiled = _final_weights(shards, model, tmp_path / "compiled", caps, batch_size=4,
                              attention="sdpa", compile=True)
    assert calls == ["BlipForConditionalGeneration"]
    assert json.loads((tmp_path / "compiled" / "runtime.json").read_text())["compile"] is True
    assert max(_max_diff(plain[n], compiled[n]) for n in plain if plain[n].is_floating_point()) < 1e-5
    from capaudit.train_downstream.captioner import load_model_and_tokenizer
    from capaudit.train_downstream.data import make_collate

    _, tok = load_model_and_tokenizer(model)
    batch = [(torch.zeros(3, 32, 32).numpy(), c) for c in caps[:3]]
    assert make_collate(tok, 30522, 40, pad_multiple=8)(batch)["input_ids"].shape[1] % 8 == 0
    assert make_collate(tok, 30522, 40)(batch)["input_ids"].shape[1] == 12  # longest caption


@pytest.mark.gpu
def test_benchmark_on_gpu_every_option():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_train

    rows = bench_train.main(["--size", "tiny", "--batch-sizes", "4", "--steps", "2",
                             "--images", "8", "--device", "cuda"])
    assert len(rows) == 8 and all("error" not in r for r in rows)  # 2 x 2 x 2 options
    assert {r["precision"] for r in rows} <= {"fp32", "bf16"}
