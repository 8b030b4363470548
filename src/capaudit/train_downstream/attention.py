"""BLIP attention through ``torch.nn.functional.scaled_dot_product_attention``.

Why: transformers' BLIP (vision ``BlipAttention``, text ``BlipTextSelfAttention``) has
only the eager path: it materialises every ``(batch, heads, query, key)`` score and
probability tensor and keeps them for the backward pass, which is where a BLIP-base
fine-tune spends its memory and much of its time (577 image tokens per sample at 384 px).
SDPA computes the same softmax attention in fused kernels (flash / memory-efficient on a
GPU) without keeping the probabilities.

How: :func:`use_attention` swaps the class of each attention module of a loaded model
for a subclass whose ``forward`` calls SDPA with the same scale and the same additive
mask the model builds for its eager path (padding, causal, cross-attention). Weights,
``state_dict`` and ``save_pretrained`` are untouched, so a run folder is the same with
either path, and ``use_attention(model, "eager")`` swaps back. The SDPA path returns no
attention maps (``None``); inspect them on the eager path. At attention dropout 0 (BLIP's
default) both paths compute the same function: ``tests/test_downstream_speed.py`` holds
outputs and gradients within 1e-5 at float32.
"""

from __future__ import annotations

import functools
import math

from capaudit.errors import InputError, require

__all__ = ["ATTENTION_KINDS", "use_attention", "attention_kind", "sdpa_supported"]

ATTENTION_KINDS = ("eager", "sdpa")
# the BLIP attention code the SDPA forwards mirror (masks built by masking_utils, the
# EncoderDecoderCache of generation) is transformers 5's; 4.x has other signatures
MIN_TRANSFORMERS = 5


def sdpa_supported() -> bool:
    """Whether the installed transformers has the BLIP attention these forwards mirror."""
    transformers = require("transformers", "ml", "downstream training")
    return int(transformers.__version__.split(".")[0]) >= MIN_TRANSFORMERS


@functools.lru_cache(maxsize=1)
def _classes() -> dict:
    """``{eager class: sdpa subclass}``, built on first use (transformers loads lazily)."""
    torch = require("torch", "ml", "downstream training")
    require("transformers", "ml", "downstream training")
    from transformers.models.blip.modeling_blip import BlipAttention
    from transformers.models.blip.modeling_blip_text import BlipTextSelfAttention

    sdpa = torch.nn.functional.scaled_dot_product_attention

    class SdpaBlipAttention(BlipAttention):
        """The vision encoder's self-attention (no mask: every patch sees every patch)."""

        def forward(self, hidden_states, **kwargs):
            bsz, n, dim = hidden_states.size()
            qkv = self.qkv(hidden_states).reshape(bsz, n, 3, self.num_heads, self.head_dim)
            query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            ctx = sdpa(query, key, value, dropout_p=self.dropout.p if self.training else 0.0,
                       scale=self.scale)
            return self.projection(ctx.transpose(1, 2).reshape(bsz, n, dim)), None

    class SdpaBlipTextSelfAttention(BlipTextSelfAttention):
        """The text decoder's causal self-attention and its cross-attention to the image,
        with the key/value cache of generation handled as the eager forward does."""

        def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None,
                    encoder_attention_mask=None, cache=None, past_key_values=None, **kwargs):
            cache = cache if cache is not None else past_key_values
            head = self.attention_head_size
            query = self.query(hidden_states).view(*hidden_states.shape[:-1], -1, head)
            query = query.transpose(1, 2)
            cross = encoder_hidden_states is not None
            mask = encoder_attention_mask if cross else attention_mask
            key, value = _keys_values(self, hidden_states, encoder_hidden_states, cache, kwargs)
            ctx = sdpa(query, key, value, attn_mask=_sdpa_mask(torch, mask, query),
                       dropout_p=self.dropout.p if self.training else 0.0,
                       scale=1.0 / math.sqrt(head))
            ctx = ctx.transpose(1, 2).contiguous()
            return ctx.view(*ctx.shape[:-2], self.all_head_size), None

    return {BlipAttention: SdpaBlipAttention, BlipTextSelfAttention: SdpaBlipTextSelfAttention}


def _keys_values(module, hidden_states, encoder_hidden_states, cache, kwargs):
    """Keys and values as ``BlipTextSelfAttention.forward`` makes them: from the image for
    cross-attention, reused from the cache once it holds them, appended to it otherwise."""
    from transformers.cache_utils import EncoderDecoderCache

    cross = encoder_hidden_states is not None
    current = cache
    updated = False
    if cache is not None and isinstance(cache, EncoderDecoderCache):
        updated = cache.is_updated.get(module.layer_idx)
        current = cache.cross_attention_cache if cross else cache.self_attention_cache
    if cross and cache is not None and updated:
        layer = current.layers[module.layer_idx]
        return layer.keys, layer.values
    source = encoder_hidden_states if cross else hidden_states
    shape = (*source.shape[:-1], -1, module.attention_head_size)
    key = module.key(source).view(shape).transpose(1, 2)
    value = module.value(source).view(shape).transpose(1, 2)
    if cache is not None:
        key, value = current.update(key, value, module.layer_idx, kwargs=kwargs)
        if cross and isinstance(cache, EncoderDecoderCache):
            cache.is_updated[module.layer_idx] = True
    return key, value


def _sdpa_mask(torch, mask, query):
    """The eager path's mask for SDPA: a boolean mask as is, an additive float mask in the
    query's dtype (where that dtype cannot hold the mask's large negative value, as
    float16 cannot float32's, the mask becomes boolean: attend where it is 0)."""
    if mask is None or mask.dtype == torch.bool:
        return mask
    mask = mask.to(query.device)
    if mask.dtype == query.dtype:
        return mask
    if torch.finfo(query.dtype).max >= torch.finfo(mask.dtype).max:
        return mask.to(query.dtype)
    return mask > torch.finfo(mask.dtype).min / 2


def use_attention(model, kind: str):
    """Switch every BLIP attention module of ``model`` to ``kind`` (``eager`` or ``sdpa``),
    in place; returns ``model``."""
    if kind not in ATTENTION_KINDS:
        raise InputError(f"unknown attention '{kind}'", fix=f"one of auto, {', '.join(ATTENTION_KINDS)}")
    if kind == "sdpa" and not sdpa_supported():
        import transformers

        raise InputError(f"--attention sdpa needs transformers >= {MIN_TRANSFORMERS} "
                         f"(installed: {transformers.__version__})",
                         fix="pip install -U transformers, or pass --attention eager")
    classes = _classes()
    back = {v: k for k, v in classes.items()}
    for module in model.modules():
        cls = type(module)
        if kind == "sdpa" and cls in classes:
            module.__class__ = classes[cls]
        elif kind == "eager" and cls in back:
            module.__class__ = back[cls]
    return model


def attention_kind(model) -> str:
    """``sdpa`` when every BLIP attention module of ``model`` uses SDPA, else ``eager``."""
    sdpa = tuple(_classes().values())
    eager = tuple(_classes())
    found = [m for m in model.modules() if isinstance(m, eager)]
    return "sdpa" if found and all(isinstance(m, sdpa) for m in found) else "eager"
