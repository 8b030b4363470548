"""LIC benchmarks: seconds per seed, and the 10-seed acceptance run against the published LIC_M.

    PYTHONPATH=src python benchmarks/bench_lic.py speed [--epochs 20] [--transformer-epochs 1] [--threads 2]
    PYTHONPATH=src python benchmarks/bench_lic.py flops [--threads 1,2]
    PYTHONPATH=src python benchmarks/bench_lic.py acceptance --sets oscar,nic [--seeds 10]
        [--cache-file out/lic_cache.json]

``speed`` trains one seed of the faithful LSTM on the 10,780 oscar captions
(5,966 train / 662 test) and of the MiniLM variant, and reports wall seconds,
process CPU seconds and the load average (other processes on a shared 2-core
box inflate wall time; CPU seconds / threads is the contention-free estimate).
``speed --epochs E`` with E < 20 extrapolates: the per-seed figure printed is the set-up
(vocabulary, encoding, scoring) plus 20/E times the measured epochs, so say so when
quoting it.
``flops`` asks whether training is compute bound: it counts the GEMM FLOPs of one
training step of the LSTM (forward + backward, B=64 captions of T tokens), times the
step on the dense (fused oneDNN RNN) and the packed path, and times the same GEMMs --
the same shapes, in the order an LSTM needs them -- as plain ``torch.matmul`` calls,
plus one large square matmul (the machine's practical peak). The fraction printed is
GEMM-only time / step time: 100 % would mean the step does nothing but its GEMMs at the
speed ``torch.matmul`` reaches on those shapes.
``acceptance`` runs LIC_M over the reference seeds on each visible captioner
set and checks the mean against the published mean +- 2 std. A JSON cache file
makes an interrupted acceptance run resumable (finished seeds are not retrained).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from capaudit.audit.lic.runner import DEFAULT_SEEDS, run_lic  # noqa: E402

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")


class JsonFileCache:
    """get/put cache persisted to one JSON file (written after every put)."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def get(self, key):
        return self.data.get(key)

    def put(self, key, value):
        self.data[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data))


def load_set(name: str) -> dict[int, str]:
    caps = {}
    with open(SHARED / f"data/captioners/{name}_val2014_gender.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            caps[int(r["image_id"])] = r["caption"]
    return caps


def load_gender() -> dict[int, str]:
    from capaudit.io.annotation_files import load_demographics

    return load_demographics(SHARED / "data/coco2014/demographics_val2014.jsonl")[0]


def timed(fn):
    load0, c0, t0 = os.getloadavg()[0], time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0, (load0, os.getloadavg()[0])


class EpochClock:
    """Wall and CPU time at the start of ``LSTMClassifier.fit_score``, after each epoch and at
    its end (the method wrapped for the ``with`` block), to split set-up, epochs and scoring."""

    def __enter__(self):
        from capaudit.audit.lic.lstm import LSTMClassifier

        self.cls, self.orig, self.marks = LSTMClassifier, LSTMClassifier.fit_score, []
        mark = lambda: self.marks.append((time.perf_counter(), time.process_time()))  # noqa: E731
        orig = self.orig

        def fit_score(clf, *a, on_epoch=None, **k):
            mark()

            def cb(e, n):
                mark()
                if on_epoch is not None:
                    on_epoch(e, n)
            out = orig(clf, *a, on_epoch=cb, **k)
            mark()
            return out
        LSTMClassifier.fit_score = fit_score
        return self

    def __exit__(self, *exc):
        self.cls.fit_score = self.orig

    def per_seed(self, epochs: int, target: int = 20) -> dict:
        """Measured phases and the ``target``-epoch seed they extrapolate to (wall, CPU)."""
        (w0, c0), (w1, c1), (we, ce), (wz, cz) = self.marks[0], self.marks[1], self.marks[-2], self.marks[-1]
        out = {}
        for key, a, b, e, z in (("wall", w0, w1, we, wz), ("cpu", c0, c1, ce, cz)):
            per_epoch = (e - b) / (epochs - 1)   # epochs 2..E (epoch 1 carries the set-up)
            first, score = b - a, z - e
            out[key] = {"first_epoch_and_setup": first, "per_epoch": per_epoch, "scoring": score,
                        "seed": first + (target - 1) * per_epoch + score}
        return out


def speed(args) -> None:
    import torch

    caps, gender = load_set("oscar"), load_gender()
    print(f"torch {torch.__version__}, {len(os.sched_getaffinity(0))} cores, threads "
          f"{args.threads or 'by load'}, cuda {torch.cuda.is_available()}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.epochs < 2:
        sys.exit("--epochs must be >= 2 (epoch 1 carries the set-up)")
    with EpochClock() as clock:
        res, wall, cpu, load = timed(lambda: run_lic(caps, gender, None, "lstm", seeds=(args.seed,),
                                                     epochs=args.epochs, device=args.device,
                                                     progress=False, threads=args.threads))
    d, est = res["details"][args.seed], clock.per_seed(args.epochs)
    print(f"LSTM  {args.epochs} epochs, {d['n_train']} train / {d['n_test']} test: wall {wall:.1f} s, "
          f"CPU {cpu:.1f} s (load {load[0]:.1f}->{load[1]:.1f}); LIC_M {d['lic_m']:.2f}, "
          f"acc {d['accuracy_m']:.1f}")
    for key in ("wall", "cpu"):
        e = est[key]
        how = "measured" if args.epochs == 20 else f"extrapolated from {args.epochs} epochs"
        print(f"  {key:4s}: set-up + epoch 1 {e['first_epoch_and_setup']:.1f} s, then "
              f"{e['per_epoch']:.2f} s/epoch, scoring {e['scoring']:.2f} s -> 20-epoch seed "
              f"{e['seed']:.0f} s ({how})")
    if args.transformer_epochs:
        ep = args.transformer_epochs
        res, wall, cpu, load = timed(lambda: run_lic(caps, gender, None, "transformer", seeds=(args.seed,),
                                                     epochs=ep, device=args.device, progress=True,
                                                     threads=args.threads))
        d = res["details"][args.seed]
        print(f"MiniLM {ep} epoch(s): wall {wall:.1f} s (x{5 / ep:g} for the default 5 epochs: "
              f"~{wall * 5 / ep:.0f} s/seed), CPU {cpu:.1f} s (load {load[0]:.1f}->{load[1]:.1f}); "
              f"LIC_M {d['lic_m']:.2f}, acc {d['accuracy_m']:.1f}")


def lstm_gemms(t: int, b: int, emb: int = 100, hidden: int = 256, layers: int = 2) -> list[tuple]:
    """The GEMMs of one bidirectional-LSTM training step, as ``(m, k, n, repeats)``.

    Per layer and direction, forward: the input projection of all ``t`` steps at once
    ``[t*b, in] x [in, 4h]`` and ``t`` recurrent products ``[b, h] x [h, 4h]``; backward
    twice that (gradient of the inputs and of the weights, for both). Element-wise gate
    work (~1 % of the FLOPs) and the final linear layer are left out."""
    out, inp = [], emb
    for _ in range(layers):
        for _ in range(2):
            out += [(t * b, inp, 4 * hidden, 1), (b, hidden, 4 * hidden, t),            # forward
                    (t * b, 4 * hidden, inp, 1), (inp, t * b, 4 * hidden, 1),        # d input, d W_ih
                    (b, 4 * hidden, hidden, t), (hidden, t * b, 4 * hidden, 1)]      # d h, d W_hh
        inp = 2 * hidden
    return out


def _timeit(fn, repeat: int) -> tuple[float, float]:
    """Best-of-3 (wall, CPU) seconds of ``repeat`` calls of ``fn`` after a warm-up."""
    fn()
    best = None
    for _ in range(3):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(repeat):
            fn()
        r = ((time.perf_counter() - w) / repeat, (time.process_time() - c) / repeat)
        best = r if best is None or r[0] < best[0] else best
    return best


def seed_tokens(name: str = "oscar", test_ratio: float = 0.1) -> tuple[int, int]:
    """(train captions, train tokens) of LIC_M's split for one seed: the epoch's work."""
    from capaudit.audit.lic.runner import ATTRIBUTES, plan_images
    from capaudit.audit.lic.split import balanced_split
    from capaudit.text.tokenize import tokenize

    caps, gender = load_set(name), load_gender()
    c0, c1, _, _ = ATTRIBUTES["gender"]
    images = plan_images(caps, gender, None, "gender").images
    split = balanced_split(images, gender, (c0, c1), 0, test_ratio)
    return len(split.train), sum(max(1, len(tokenize(caps[i]))) for i in split.train)


def flops(args) -> None:
    """Achieved GFLOP/s of an LSTM training step against torch.matmul on the same GEMMs."""
    import torch
    from torch import nn

    from capaudit.audit.lic.lstm import BiLSTMNet

    torch.set_flush_denormal(True)
    t, b = args.tokens, 64
    gemms = lstm_gemms(t, b)
    step_flops = sum(2 * m * k * n * r for m, k, n, r in gemms)
    per_token = step_flops / (t * b)
    n_train, tokens = seed_tokens()
    seed_flops = per_token * tokens * 20
    print(f"torch {torch.__version__}, mkldnn {torch.backends.mkldnn.is_available()}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"one training step, B={b} captions of T={t} tokens: {step_flops / 1e9:.2f} GFLOP in GEMMs "
          f"({per_token / 1e6:.2f} MFLOP per token, a third of it forward); a 20-epoch LIC_M seed "
          f"on oscar ({n_train:,} train captions, {tokens:,} tokens): {seed_flops / 1e12:.1f} TFLOP")
    mats = [(torch.randn(m, k), torch.randn(k, n), r) for m, k, n, r in gemms]
    big = torch.randn(1024, 1024)
    torch.manual_seed(0)
    net = BiLSTMNet(2000, dropout=0.5)
    opt = torch.optim.Adam(net.parameters(), lr=5e-5)
    loss_fn = nn.BCEWithLogitsLoss()
    ids = torch.randint(2, 2000, (t, b))
    y = torch.randint(0, 2, (b,)).float()
    ragged = torch.full((b,), t, dtype=torch.long)
    ragged[b // 2:] = t - 1  # half the batch one token shorter: the packed path

    def step(lengths):
        loss = loss_fn(net(ids, lengths), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    net.train()
    for threads in [int(x) for x in str(args.threads).split(",")]:
        torch.set_num_threads(threads)
        rate = lambda f, s: f"{f / s / 1e9:.1f}"  # noqa: E731
        pw, pc = _timeit(lambda: torch.matmul(big, big), args.repeat)
        peak = 2 * 1024 ** 3
        gw, gc = _timeit(lambda: [torch.matmul(x, y) for x, y, r in mats for _ in range(r)], args.repeat)
        print(f"{threads} thread(s), load {os.getloadavg()[0]:.2f}; GFLOP/s per wall second and per "
              f"CPU second (CPU: what contention does not inflate, spin-waiting aside)")
        print(f"  torch.matmul 1024x1024: {rate(peak, pw)} wall, {rate(peak, pc)} CPU (practical peak)")
        print(f"  torch.matmul, the step's GEMMs: {gw * 1e3:.0f} ms, {rate(step_flops, gw)} wall, "
              f"{rate(step_flops, gc)} CPU")
        for label, lengths in (("dense (fused oneDNN RNN)", None), ("packed", ragged)):
            w, c = _timeit(lambda lengths=lengths: step(lengths), args.repeat)
            print(f"  LSTM step, {label}: {w * 1e3:.0f} ms, {rate(step_flops, w)} wall, "
                  f"{rate(step_flops, c)} CPU = {100 * gc / c:.0f} % of the same GEMMs in "
                  f"torch.matmul, {100 * (step_flops / c) / (peak / pc):.0f} % of the square peak "
                  f"(CPU); a seed at this rate: {seed_flops / step_flops * c:.0f} CPU s")
        print(f"  compute bound of a seed at the square peak: {seed_flops / (peak / pc):.0f} CPU s "
              f"= {seed_flops / (peak / pc) / threads:.0f} s wall on {threads} free core(s)")


def acceptance(args) -> int:
    published = json.loads((SHARED / "references/reference_metrics_visible.json").read_text())
    pub = published["lic_published"]["LSTM_LIC_M"]
    gender = load_gender()
    cache = JsonFileCache(Path(args.cache_file)) if args.cache_file else None
    seeds = DEFAULT_SEEDS[args.skip_seeds: args.seeds]
    failed = 0
    for name in args.sets.split(","):
        res, wall, _, _ = timed(lambda: run_lic(load_set(name), gender, None, "lstm", seeds=seeds,
                                                epochs=args.epochs, device=args.device, cache=cache))
        m, (pm, ps) = res["lic_m"], pub[name]
        ok = abs(m["value"] - pm) <= 2 * ps
        failed += not ok
        per = ", ".join(f"{s}: {v:.2f}" for s, v in m["seeds"].items())
        print(f"{name:9s} LIC_M {m['value']:.2f} +- {m['std']:.2f} over {len(seeds)} seeds "
              f"(published {pm} +- {ps}; window {pm - 2 * ps:.1f}..{pm + 2 * ps:.1f}: "
              f"{'PASS' if ok else 'FAIL'}) [{wall:.0f} s]\n          seeds {per}", flush=True)
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--epochs", type=int, default=20)
    sp.add_argument("--transformer-epochs", type=int, default=1, help="0 to skip the MiniLM run")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--device", default="auto")
    sp.add_argument("--threads", type=int, default=None, help="torch threads (default: by load)")
    fl = sub.add_parser("flops")
    fl.add_argument("--threads", default="1,2", help="comma list of torch thread counts")
    fl.add_argument("--tokens", type=int, default=10, help="caption length T of the timed batch")
    fl.add_argument("--repeat", type=int, default=3, help="steps per timing (best of 3)")
    ac = sub.add_parser("acceptance")
    ac.add_argument("--sets", default="nic,sat,att2in,updn,oscar,nic_plus")
    ac.add_argument("--seeds", type=int, default=10)
    ac.add_argument("--skip-seeds", type=int, default=0, help="skip the first K seeds (resume elsewhere)")
    ac.add_argument("--epochs", type=int, default=20)
    ac.add_argument("--device", default="auto")
    ac.add_argument("--cache-file", default=None)
    args = ap.parse_args()
    if not (SHARED / "data").is_dir():
        print(f"shared data not found at {SHARED} (set CAPAUDIT_SHARED)")
        return 2
    if args.mode == "flops":
        return flops(args) or 0
    return speed(args) or 0 if args.mode == "speed" else acceptance(args)


if __name__ == "__main__":
    sys.exit(main())
