"""ShareGPT4V-style: ask a VLM for a detailed description of the image itself.

Why no caption in the prompt: the point of this recipe is a description
grounded in pixels only, so its hallucinations are the VLM's own.
"""

from __future__ import annotations

from capaudit.enrich.adapters.base import Adapter, Context, render
from capaudit.llm.base import GenRequest

MIME = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}


class ShareGPT4VAdapter(Adapter):
    name = "sharegpt4v"
    prompts = ("sharegpt4v",)

    def process(self, samples, ctx: Context):
        prompt = render(ctx.prompt("sharegpt4v"))
        rows: list[dict | None] = [None] * len(samples)
        reqs, idx = [], []
        for i, s in enumerate(samples):
            if s.image is None:
                rows[i] = self.row(s, error="sample has no image")
            else:
                reqs.append(GenRequest(prompt, image=s.image,
                                       image_mime=MIME.get(s.image_ext or "", "image/jpeg")))
                idx.append(i)
        prov = self.provenance(ctx, tags=[])
        for i, res in zip(idx, ctx.llm.generate(reqs)):
            rows[i] = self.row(samples[i], res.text, res.error, **prov)
        return rows
