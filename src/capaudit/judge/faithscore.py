"""FaithScore: atomic facts of the descriptive sentences, each verified against the image.

1. an LLM splits each sentence into atomic facts; a sentence that describes
   nothing visible gets none and is *not descriptive* (``judge_facts.txt``);
2. the judge (a VLM) verifies each fact against the evidence (``judge_verify_unit.txt``).

Per caption, FaithScore = true facts / verified facts, and sentence-level
FaithScore = descriptive sentences whose facts are all true / descriptive
sentences whose facts were all verified. The set values are the means over
captions that have at least one verified fact (resp. sentence), with
image-bootstrap intervals. Facts whose verification is unparsed or failed
leave the denominators (a sentence with one of them has no sentence-level value).
"""

from __future__ import annotations

from capaudit.judge.core import Judge, Task
from capaudit.judge.factuality import split_sentences
from capaudit.judge.parse import unit_list, yes_no_critique

__all__ = ["caption_faithscore", "compute"]


def caption_faithscore(facts: list[list[bool | None]]) -> tuple[float | None, float | None]:
    """(FaithScore, sentence-level FaithScore) of one caption from per-sentence fact verdicts."""
    known = [f for sent in facts for f in sent if f is not None]
    fs = sum(known) / len(known) if known else None
    sents = [all(sent) for sent in facts if sent and all(f is not None for f in sent)]
    return fs, (sum(sents) / len(sents) if sents else None)


def rows(judge: Judge, s, evidence, cfg) -> dict:
    """A chunk judged (:mod:`.parts`): a row per fact (``rows``) and per caption
    (``captions``: its FaithScore and sentence-level FaithScore)."""
    assumed = max(1, int(cfg.get("assumed_units", 8)) // 2)
    sents = [split_sentences(c) for c in s.captions]
    flat = [(c, k, t) for c, ss in enumerate(sents) for k, t in enumerate(ss)]
    tasks = [Task("judge_facts", {"sentence": t}, unit_list, expect_out=20 * assumed)
             for _, _, t in flat]
    facts: dict = {}
    for (c, k, _), v in zip(flat, judge.run(tasks)):
        facts[(c, k)] = [{"text": f"fact {j}"} for j in range(assumed)] \
            if v.status == "dry-run" else (
                [u for u in v.value if u["relevant"]] if v.status == "ok" else None)
    asks = [(c, k, j, f["text"]) for (c, k), fs in facts.items() for j, f in enumerate(fs or [])]
    vtasks = [Task("judge_verify_unit", {"evidence": evidence.text(s.image_ids[c]), "unit": t},
                   yes_no_critique, evidence.image(s.image_ids[c]), expect_out=15)
              for c, _, _, t in asks]
    verdict = {}
    rows = []
    for (c, k, j, t), v in zip(asks, judge.run(vtasks)):
        verdict[(c, k, j)] = v.value[0] if v.status == "ok" else None
        rows.append({"caption_idx": c, "image_id": s.image_ids[c], "kind": "fact",
                     "unit_idx": j, "sentence_idx": k, "text": t, "status": v.status,
                     "label": None if verdict[(c, k, j)] is None else
                     ("true" if verdict[(c, k, j)] else "false"),
                     "score": None if verdict[(c, k, j)] is None else float(verdict[(c, k, j)]),
                     "critique": v.value[1] if v.status == "ok" and v.value[1] else None,
                     "p_yes": v.p_yes, "prompt": "judge_verify_unit"})
    captions = []
    for c, ss in enumerate(sents):
        per = [[verdict.get((c, k, j)) for j in range(len(facts.get((c, k)) or []))]
               for k in range(len(ss))]
        fs, sl = caption_faithscore(per)
        captions.append({"caption_idx": c, "image_id": s.image_ids[c], "kind": "caption",
                         "unit_idx": -1, "text": s.captions[c],
                         "status": "ok" if fs is not None else "unparsed", "score": fs,
                         "sentence_level": sl, "prompt": "judge_facts",
                         "undecomposed": sum(facts.get((c, k)) is None for k in range(len(ss)))})
    return {"rows": rows, "captions": captions}


def values(s, parts: list[dict], cfg, evidence_kind: str) -> tuple:
    """The set's fact rows then its caption rows, in its order; the means over captions."""
    from capaudit.judge.parts import joined
    from capaudit.judge.stats import label, ratio_table

    captions = joined(parts, "captions")
    t = ratio_table(s.image_ids, {
        k: ([r[src] or 0.0 for r in captions], [int(r[src] is not None) for r in captions])
        for k, src in (("faithscore", "score"), ("sentence_faithscore", "sentence_level"))},
        cfg["n_boot"], cfg["seed"])
    return (joined(parts) + captions,
            {label(f"faithscore.{k}", evidence_kind): v for k, v in t.items()}, None)


def compute(judge: Judge, sets, evidence, cfg) -> "Judged":
    from capaudit.judge.parts import computed

    return computed(rows, values, judge, sets, evidence, cfg)


compute.needs_evidence = "image"
compute.by_image = True   # chunks of whole images judge as the set (:mod:`.parts`)
