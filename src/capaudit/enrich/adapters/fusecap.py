"""FuseCap-style: original caption + vision-tool facts -> one fused caption (LLM, text only).

Why text only: FuseCap's fuser is a language model; the image reaches it only
through the detector's tags, their colour names and (optionally) OCR. The
tags used are stored in the provenance, so an audit can tell whether a
hallucinated object came from the detector or from the LLM.
"""

from __future__ import annotations

from capaudit.enrich.adapters.base import Adapter, Context, render
from capaudit.llm.base import GenRequest
from capaudit.enrich.colors import dominant_color
from capaudit.enrich.detectors.base import decode_image


def describe_tags(tags: list[dict]) -> str:
    """``person (gray), cat (orange)``; repeated pairs once, in score order."""
    seen, parts = set(), []
    for t in tags:
        text = f"{t['category']} ({t['color']})" if t.get("color") else t["category"]
        if text not in seen:
            seen.add(text)
            parts.append(text)
    return ", ".join(parts) if parts else "none"


class FuseCapAdapter(Adapter):
    name = "fusecap"
    prompts = ("fusecap",)
    needs_detector = True

    def tags_for(self, samples, ctx: Context) -> list[tuple[list[dict], list[str], str | None]]:
        """(tags, ocr lines, error) per sample."""
        images, errors = [], []
        for s in samples:
            try:
                images.append(decode_image(s.image) if s.image is not None else None)
                errors.append(None if s.image is not None else "sample has no image")
            except Exception as exc:  # a corrupt image fails this sample only
                images.append(None)
                errors.append(f"cannot decode image ({exc.__class__.__name__})")
        ok = [i for i, im in enumerate(images) if im is not None]
        dets = ctx.detector.detect([images[i] for i in ok], [samples[i].image_id for i in ok]) \
            if ok else []
        out: list = [([], [], e) for e in errors]
        for i, ds in zip(ok, dets):
            tags = []
            for d in ds:
                t = d.to_dict()
                if ctx.colors and d.box is not None:
                    t["color"] = dominant_color(images[i], d.box)
                tags.append(t)
            ocr = ctx.ocr.read(images[i]) if ctx.ocr is not None else []
            out[i] = (tags, ocr, None)
        return out

    def process(self, samples, ctx: Context):
        template = ctx.prompt("fusecap")
        facts = self.tags_for(samples, ctx)
        rows, reqs, where = [], [], []
        for s, (tags, ocr, err) in zip(samples, facts):
            caps = self.source_captions(s, ctx)
            if err or not caps:
                rows.append(self.row(s, error=err or "sample has no caption"))
                continue
            for ci, cap in caps:
                prompt = render(template, caption=cap, tags=describe_tags(tags),
                                ocr="; ".join(ocr) if ocr else "none")
                reqs.append(GenRequest(prompt))
                where.append(len(rows))
                rows.append((s, ci, cap, tags, ocr))
        det = getattr(ctx.detector, "model_id", "")
        for pos, res in zip(where, ctx.llm.generate(reqs)):
            s, ci, cap, tags, ocr = rows[pos]
            prov = self.provenance(ctx, tags=tags, ocr=ocr, detector=det, source_caption=cap,
                                   source_index=ci)
            rows[pos] = self.row(s, res.text, res.error, **prov)
        return rows
