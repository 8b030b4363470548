"""LIC over seeds: LIC_M (captions under test), LIC_D (human captions), LIC = LIC_M - LIC_D.

Why seeds: the balanced split and the classifier's initialisation make one
LIC value noisy (a few points between seeds on 662 test captions), so the
reference reports mean and std over 10 seeds; we return every seed's value
beside the mean.

Why one image set: when human captions are given, LIC_M and LIC_D are both
computed on the labelled images that have a model caption *and* human captions,
with the same split per seed, so that their difference
measures the captions and not the image sample. Without human captions LIC_M
uses every labelled image of the caption set (as the published LIC_M table).

LIC_D trains one classifier per human caption index (COCO has 5 captions per
image) and averages them; with ``align_vocab`` human words the model never
produces become ``<unk>`` (the model vocabulary is every masked token of the
model's captions), as in the reference.

Caching: each seed's result is stored under a key that hashes the ordered
model captions, the human captions, the labels of the images used, the full
classifier config, the attribute, the options and the seed; a rerun with the
same inputs trains nothing. ``cache`` is any object with ``get(key) -> dict |
None`` and ``put(key, value: dict)``.

std is the population standard deviation (ddof=0) over seeds.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from capaudit.audit.lic.masking import ATTRIBUTES, mask_tokens, tokenize
from capaudit.audit.lic.plan import LicPlan, _minutes, calibrate, plan_images  # noqa: F401
from capaudit.audit.lic.split import balanced_split
from capaudit.core.registry import Registry
from capaudit.errors import InputError, require

DEFAULT_SEEDS = (0, 12, 456, 789, 100, 200, 300, 400, 500, 1234)
CACHE_VERSION = "lic-v1"

CLASSIFIERS: Registry = Registry("lic classifier")
CLASSIFIERS.register("lstm", "capaudit.audit.lic.lstm:LSTMClassifier", version="1", extra="ml",
                     description="reference-faithful 2-layer BiLSTM (Hirota et al. 2022)")
CLASSIFIERS.register("transformer", "capaudit.audit.lic.transformer:TransformerClassifier",
                     version="1", extra="ml",
                     description="fine-tuned local encoder (default: packaged MiniLM-L6)")


class Cache(Protocol):
    def get(self, key: str) -> dict | None: ...
    def put(self, key: str, value: dict) -> None: ...


def fingerprint(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (dict keys as given: order is part of the data)."""
    h = hashlib.sha256()
    h.update(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8"))
    return h.hexdigest()


def resolve_device(device: str = "auto") -> str:
    torch = require("torch", "ml", "LIC classifiers")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device '{device}' requested but no CUDA GPU is available", fix="use --device cpu")
    return device


def cpu_threads(requested: int | None = None) -> tuple[int, str]:
    """Intra-op threads for CPU training, and why.

    Why not always every core: torch's OpenMP threads spin at each barrier, so
    when other processes hold the cores a 2-thread LSTM epoch burns ~8x the CPU
    time of a 1-thread one and runs ~5x slower in wall time (measured on the
    shared 2-core box at load 16: 441 vs 91 ms per caption-epoch). We use as
    many threads as there are idle cores by the 1-minute load, at least one.
    """
    cores = len(os.sched_getaffinity(0))
    if requested:
        return requested, f"{requested} (asked)"
    load = os.getloadavg()[0]
    n = max(1, min(cores, int(cores - load + 0.5)))
    return n, f"{n} of {cores} cores (1-minute load {load:.1f}; --threads to choose)"


def summarize(values: Mapping[int, float]) -> dict:
    """{"value": mean, "std": population std (None for one seed: no spread to speak of),
    "seeds": {seed: value}}."""
    vals = list(values.values())
    return {"value": statistics.fmean(vals) if vals else None,
            "std": statistics.pstdev(vals) if len(vals) > 1 else None,
            "seeds": {int(k): v for k, v in values.items()}}


def _progress(enabled: bool):
    if not enabled:
        return None
    import sys

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    quiet = not sys.stderr.isatty() and not os.environ.get("CAPAUDIT_PROGRESS")
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                    transient=False, disable=quiet)


def run_lic(model_captions: Mapping[int, str], labels: Mapping[int, str],
            human_captions: Mapping[int, Sequence[str]] | None = None, classifier: str = "lstm",
            seeds: Sequence[int] = DEFAULT_SEEDS, epochs: int | None = None, device: str = "auto",
            cache: Cache | None = None, progress: bool = True, *, attribute: str = "gender",
            align_vocab: bool = True, test_ratio: float = 0.1,
            classifier_options: Mapping[str, Any] | None = None, threads: int | None = None,
            report: Callable[[str], None] | None = None) -> dict:
    """LIC_M, LIC_D and LIC over ``seeds``.

    ``model_captions``: image id -> caption (order matters: it fixes the split);
    ``labels``: image id -> class (male/female, or light/dark for ``attribute=
    "skin_tone"``); ``human_captions``: image id -> list of human captions.
    ``epochs=None`` uses the classifier's reference default (LSTM 20, transformer 5).
    Returns ``{"lic_m", "lic_d", "lic"}`` (each ``{"value", "std", "seeds"}``;
    ``lic_d``/``lic`` are None without human captions) plus ``n_images``,
    ``config`` and per-seed ``details``.

    ``report(line)``, when given, hears before any training how many images
    take part and why, and an estimate of the time (from :func:`calibrate`).
    """
    if attribute not in ATTRIBUTES:
        raise InputError(f"unknown attribute '{attribute}'", fix="use gender or skin_tone")
    c0, c1, words, word_token = ATTRIBUTES[attribute]
    if not seeds:
        raise InputError("no seeds given", fix="use --seeds N with N >= 1")
    device = _training_device(device, threads, report)

    plan = plan_images(model_captions, labels, human_captions, attribute)
    images, n_idx = plan.images, plan.n_idx
    if report is not None:
        report(plan.describe())

    clf = CLASSIFIERS.get(classifier)(device=device, **dict(classifier_options or {}))
    mtok = clf.mask_token or word_token
    tok_m, keep = _masked_model_tokens(model_captions, images, mtok, words,
                                       human_captions is not None and align_vocab)

    config = {"version": CACHE_VERSION, "classifier": clf.config(), "attribute": attribute,
              "epochs": epochs if epochs is not None else clf.default_epochs,
              "test_ratio": test_ratio, "align_vocab": align_vocab, "human_captions_per_image": n_idx}
    keys = _cache_keys(model_captions, labels, human_captions, images, config, seeds)
    hits = {s: cache.get(k) if cache is not None else None for s, k in keys.items()}
    todo = [s for s in keys if hits[s] is None]
    n_epochs = config["epochs"] * (1 + n_idx) * len(todo)   # the progress bar's total
    if report is not None and todo:
        cal = calibrate(clf, images, labels, (c0, c1), tok_m, todo[0], test_ratio)
        report(f"{len(todo)} seed(s) to train ({len(keys) - len(todo)} cached): "
               f"{1 + n_idx} classifier(s) x {config['epochs']} epochs each on "
               f"~{cal.n_train:,} captions; estimated "
               f"{_minutes(cal.seconds((1 + n_idx) * len(todo), config['epochs']))} (calibrated "
               f"on this machine now: {cal.per_caption * 1000:.2f} ms per caption-epoch, "
               f"{cal.per_epoch:.2f} s per epoch, {cal.fixed:.1f} s per classifier)")

    def train(seed: int, bar, task) -> dict:
        return _one_seed(clf, images, labels, (c0, c1), tok_m, human_captions, n_idx, keep, mtok,
                         words, seed, epochs, test_ratio, bar, task)

    details = _run_seeds(keys, hits, todo, cache, train, _progress(progress),
                         f"LIC {classifier}: epochs", n_epochs)
    return _summary(details, len(images), config, human_captions is not None)


def _training_device(device: str, threads: int | None,
                     report: Callable[[str], None] | None) -> str:
    """The device to train on; on CPU, torch's intra-op threads set (:func:`cpu_threads`)
    and reported."""
    torch = require("torch", "ml", "LIC classifiers")
    device = resolve_device(device)
    if device == "cpu":
        threads, why = cpu_threads(threads)
        torch.set_num_threads(threads)
        if report is not None:
            report(f"torch threads: {why}")
    return device


def _masked_model_tokens(model_captions: Mapping[int, str], images: list, mtok: str, words,
                         align: bool) -> tuple[dict, set | None]:
    """The masked tokens of the images' model captions, and with ``align`` the model's
    vocabulary (every masked token of every model caption, plus the mask) that human
    words outside it become ``<unk>`` against."""
    tok_m = {i: mask_tokens(tokenize(model_captions[i]), mtok, words) for i in images}
    keep = None
    if align:
        keep = {t for i in model_captions for t in mask_tokens(tokenize(model_captions[i]), mtok, words)}
        keep.add(mtok)
    return tok_m, keep


def _cache_keys(model_captions, labels, human_captions, images, config: dict,
                seeds: Sequence[int]) -> dict[int, str]:
    """Each seed's cache key: the model captions, the human captions and labels of the
    images used, the config and the seed, hashed."""
    fp_m = fingerprint([[i, model_captions[i]] for i in model_captions])
    fp_h = None if human_captions is None else fingerprint(
        [[i, list(human_captions[i])] for i in images])
    fp_l = fingerprint([[i, labels[i]] for i in images])
    return {int(seed): "lic:" + fingerprint({"m": fp_m, "h": fp_h, "l": fp_l, "config": config,
                                             "seed": int(seed)}) for seed in seeds}


def _run_seeds(keys: dict[int, str], hits: dict, todo: list, cache: Cache | None,
               train: Callable, bar, title: str, n_epochs: int) -> dict[int, dict]:
    """Every seed's details: a cache hit as stored, the others trained (``train(seed, bar,
    task)``) and stored, under the progress ``bar`` (None: none)."""
    details: dict[int, dict] = {}
    if bar is not None:
        bar.start()
    try:
        task = bar.add_task(title, total=n_epochs) if bar and todo else None
        for seed, key in keys.items():
            if hits[seed] is not None:
                details[seed] = dict(hits[seed]) | {"cached": True}
                continue
            details[seed] = train(seed, bar, task)
            if cache is not None:
                cache.put(key, details[seed])
            details[seed] = details[seed] | {"cached": False}
    finally:
        if bar is not None:
            bar.stop()
    return details


def _summary(details: dict[int, dict], n_images: int, config: dict, with_reference: bool) -> dict:
    """run_lic's result: LIC_M (and with a reference LIC_D and LIC) summarized over seeds."""
    lic_m = summarize({s: d["lic_m"] for s, d in details.items()})
    out = {"lic_m": lic_m, "lic_d": None, "lic": None, "n_images": n_images, "config": config,
           "details": details}
    if with_reference:
        out["lic_d"] = summarize({s: d["lic_d"] for s, d in details.items()})
        out["lic"] = summarize({s: d["lic_m"] - d["lic_d"] for s, d in details.items()})
    return out


def _one_seed(clf, images, labels, classes, tok_m, human, n_idx, keep, mtok, words, seed, epochs,
              test_ratio, bar, task=None) -> dict:
    """Train LIC_M's classifier and, with human captions, one per caption index for LIC_D."""
    t0 = time.perf_counter()
    split = balanced_split(images, labels, classes, seed, test_ratio)

    def fit(tokens: Mapping[int, list[str]], what: str) -> dict:
        if bar is not None and task is not None:
            bar.update(task, description=f"LIC seed {seed} {what}: epochs")
        cb = (lambda e, n: bar.advance(task)) if bar is not None and task is not None else None
        return clf.fit_score([tokens[i] for i in split.train], split.train_labels,
                             [tokens[i] for i in split.test], split.test_labels,
                             seed=seed, epochs=epochs, on_epoch=cb)

    m = fit(tok_m, "LIC_M")
    out = {"lic_m": m["score"], "accuracy_m": m["accuracy"], "n_train": m["n_train"],
           "n_test": m["n_test"], "lic_d": None, "lic_d_per_caption": None}
    if human is not None:
        per = []
        for k in range(n_idx):
            tok_d = {i: mask_tokens(tokenize(human[i][k]), mtok, words, keep=keep,
                                    unk_token=clf.unk_token) for i in images}
            per.append(fit(tok_d, f"LIC_D caption {k + 1}/{n_idx}")["score"])
        out["lic_d_per_caption"] = per
        out["lic_d"] = statistics.fmean(per)
    out["seconds"] = time.perf_counter() - t0
    return out
