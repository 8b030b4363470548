"""CapScore (LOTUS): the judge rates a caption's agreement with the reference, 0 to 1.

Two numbers per caption (``configs/prompts/judge_capscore.txt``): ``semantic``
(same content as the reference) and ``overall`` (an equally good caption).
The reference is the image's human captions joined (``--reference SET``). Set
values are the means with image-bootstrap intervals, stored as
``capscore.semantic`` / ``capscore.overall`` so the LOTUS alignment criterion
can include them. Text only: the judge never needs the image.
"""

from __future__ import annotations

from capaudit.judge.core import Judge, Task
from capaudit.judge.parse import score01

__all__ = ["compute"]


def rows(judge: Judge, s, evidence, cfg) -> dict:
    """A chunk judged (:mod:`.parts`): a row per caption, both numbers in it."""
    refs = evidence.references
    tasks = [Task("judge_capscore", {"reference": " / ".join(x.strip() for x in refs[i]),
                                     "caption": c}, score01, expect_out=15)
             for i, c in zip(s.image_ids, s.captions)]
    rows = []
    for c, (iid, cap, v) in enumerate(zip(s.image_ids, s.captions, judge.run(tasks))):
        val = v.value if v.status == "ok" else {}
        rows.append({"caption_idx": c, "image_id": iid, "kind": "caption", "unit_idx": -1,
                     "text": cap, "status": v.status, "score": val.get("overall"),
                     "semantic": val.get("semantic"), "prompt": "judge_capscore"})
    return {"rows": rows}


def values(s, parts: list[dict], cfg, evidence_kind: str) -> tuple:
    """The set's rows in its order; the means of both numbers over the judged captions."""
    from capaudit.judge.parts import joined
    from capaudit.judge.stats import label, ratio_table

    rows = joined(parts)
    parts = {k: ([r[k if k == "semantic" else "score"] or 0.0 for r in rows],
                 [int(r["status"] == "ok") for r in rows]) for k in ("semantic", "overall")}
    t = ratio_table(s.image_ids, parts, cfg["n_boot"], cfg["seed"])
    return rows, {label(f"capscore.{k}", "image"): v for k, v in t.items()}, None


def compute(judge: Judge, sets, evidence, cfg) -> "Judged":
    from capaudit.judge.parts import computed

    return computed(rows, values, judge, sets, evidence, cfg)


compute.needs_evidence = "reference"
compute.by_image = True   # chunks of whole images judge as the set (:mod:`.parts`)
