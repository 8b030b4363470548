"""CapsFusion-style: original caption + a captioner's caption -> LLM fusion.

Why two backends: caption B comes from a captioner (a VLM behind ``openai``
or a local model), the fusion from an LLM; they are configured separately
and both appear in the provenance. Caption B is cached like any response,
so trying a new fusion prompt does not re-run the captioner.
"""

from __future__ import annotations

from capaudit.enrich.adapters.base import Adapter, Context, prompt_hash, render
from capaudit.enrich.adapters.sharegpt4v import MIME
from capaudit.llm.base import GenRequest


class CapsFusionAdapter(Adapter):
    name = "capsfusion"
    prompts = ("capsfusion", "capsfusion_captioner")
    needs_captioner = True

    def process(self, samples, ctx: Context):
        captioner = ctx.captioner or ctx.llm
        cap_prompt = render(ctx.prompt("capsfusion_captioner"))
        todo = [s for s in samples if s.image is not None and s.captions]
        synth = captioner.generate([GenRequest(cap_prompt, image=s.image,
                                               image_mime=MIME.get(s.image_ext or "", "image/jpeg"))
                                    for s in todo])
        by_key = dict(zip((s.key for s in todo), synth))
        template = ctx.prompt("capsfusion")
        rows, reqs, where = [], [], []
        for s in samples:
            if s.image is None or not s.captions:
                rows.append(self.row(s, error="sample has no image" if s.image is None
                                     else "sample has no caption"))
                continue
            b = by_key[s.key]
            if b.error:
                rows.append(self.row(s, error=f"captioner: {b.error}"))
                continue
            for ci, cap in self.source_captions(s, ctx):
                reqs.append(GenRequest(render(template, caption=cap, synthetic=b.text)))
                where.append(len(rows))
                rows.append((s, ci, cap, b.text))
        for pos, res in zip(where, ctx.llm.generate(reqs)):
            s, ci, cap, synthetic = rows[pos]
            prov = self.provenance(ctx, tags=[], source_caption=cap, source_index=ci,
                                   synthetic_caption=synthetic,
                                   captioner={"backend": captioner.name,
                                              "model": captioner.model,
                                              "prompt_hash": prompt_hash(cap_prompt)})
            rows[pos] = self.row(s, res.text, res.error, **prov)
        return rows
