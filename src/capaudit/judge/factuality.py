"""Sentence factuality with context (the VNLI-Critique protocol, DOCCI-Critique criteria).

Per sentence the judge sees the evidence (image, or reference captions when
asked), the caption's earlier sentences as context and the target sentence,
and answers ``yes``/``no`` plus a short critique naming the error
(``configs/prompts/judge_factuality.txt``). Where the server returns
log-probabilities, P(yes) is stored too (for ROC-AUC in ``judge validate``).

Per caption: the share of factual sentences and whether all are factual. Per
set, the three DOCCI-Critique criteria, each with an image-bootstrap interval
(and, for two or more sets, Welch's t-test of the per-caption shares of the first two):

* ``response_correct``: share of captions whose sentences are all factual;
* ``sentence_correct``: share of all judged sentences that are factual (micro);
* ``caption_share``: mean over captions of their share of factual sentences (macro).

``unparsed`` / ``failed`` / ``not-judged`` sentences are neither factual nor
not: they leave the denominators, and a caption with any of them has no
``all factual`` value (it may be hiding the error). Their counts are reported.

This is the one implementation: the critique-revise filter scores sentences
with :func:`sentence_tasks` / :func:`judge_sentences`.
"""

from __future__ import annotations

from typing import Sequence

from capaudit.judge.core import Judge, Task
from capaudit.judge.parse import yes_no_critique

__all__ = ["sentence_tasks", "judge_sentences", "caption_scores", "summarize", "PROMPT"]

PROMPT = "judge_factuality"


def split_sentences(caption: str) -> list[str]:
    from capaudit.text.mentions import CaptionDoc

    return [s.strip() for s in CaptionDoc(0, None, caption or "").sentences]


def sentence_tasks(sentences: Sequence[str], evidence_text: str, image=None) -> list[Task]:
    """One task per sentence, its earlier sentences as context (``(none)`` for the first)."""
    return [Task(PROMPT, {"evidence": evidence_text,
                          "context": " ".join(sentences[:i]) or "(none)", "sentence": s},
                 yes_no_critique, image, expect_out=25)
            for i, s in enumerate(sentences)]


def judge_sentences(judge: Judge, image_ids: Sequence, captions: Sequence[str], evidence
                    ) -> list[dict]:
    """Per-sentence rows: caption index, sentence index, text, status, factual, critique, P(yes)."""
    rows, tasks = [], []
    for c, (iid, cap) in enumerate(zip(image_ids, captions)):
        sents = split_sentences(cap)
        tasks += sentence_tasks(sents, evidence.text(iid), evidence.image(iid))
        rows += [{"caption_idx": c, "image_id": iid, "unit_idx": k, "kind": "sentence",
                  "text": s} for k, s in enumerate(sents)]
    for row, v in zip(rows, judge.run(tasks)):
        fact, crit = v.value if v.status == "ok" else (None, None)
        row.update(status=v.status, label=None if fact is None else ("yes" if fact else "no"),
                   score=None if fact is None else float(fact), critique=crit or None,
                   p_yes=v.p_yes, raw=v.text if v.status == "unparsed" else None)
    return rows


def caption_scores(rows: list[dict], n_captions: int) -> list[dict]:
    """Per caption: judged / factual sentence counts, share, all-factual (None if unknowable)."""
    out = [{"sentences": 0, "judged": 0, "factual": 0} for _ in range(n_captions)]
    for r in rows:
        o = out[r["caption_idx"]]
        o["sentences"] += 1
        if r["score"] is not None:
            o["judged"] += 1
            o["factual"] += int(r["score"])
    for o in out:
        o["share"] = o["factual"] / o["judged"] if o["judged"] else None
        complete = o["judged"] == o["sentences"] and o["sentences"] > 0
        o["all_factual"] = (o["factual"] == o["sentences"]) if complete else None
    return out


def summarize(rows: list[dict], image_ids: Sequence, n_boot: int = 1000, seed: int = 0) -> dict:
    """The three DOCCI-Critique criteria with intervals, plus status counts."""
    from capaudit.judge.stats import ratio_table

    caps = caption_scores(rows, len(image_ids))
    parts = {
        "response_correct": ([int(bool(c["all_factual"])) for c in caps],
                             [int(c["all_factual"] is not None) for c in caps]),
        "sentence_correct": ([c["factual"] for c in caps], [c["judged"] for c in caps]),
        "caption_share": ([c["share"] or 0.0 for c in caps],
                          [int(c["share"] is not None) for c in caps]),
    }
    metrics = ratio_table(image_ids, parts, n_boot, seed)
    return {"metrics": metrics, "captions": caps, "counts": status_counts(rows)}


def status_counts(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def rows(judge: Judge, s, evidence, cfg) -> dict:
    """A chunk's sentence rows (:mod:`.parts`): what the judge said of each sentence."""
    rows = judge_sentences(judge, s.image_ids, s.captions, evidence)
    for r in rows:
        r["prompt"] = PROMPT
    return {"rows": rows}


def values(s, parts: list[dict], cfg, evidence_kind: str) -> tuple:
    """The set's sentence rows, then a row per caption; the three criteria; the counts."""
    from capaudit.judge.parts import joined
    from capaudit.judge.stats import label

    rows = joined(parts)
    summ = summarize(rows, s.image_ids, cfg["n_boot"], cfg["seed"])
    rows += [{"caption_idx": c, "image_id": iid, "kind": "caption", "unit_idx": -1,
              "text": cap, "status": "ok" if sc["judged"] else "unparsed",
              "label": None if sc["all_factual"] is None else str(sc["all_factual"]).lower(),
              "score": sc["share"], "prompt": PROMPT}
             for c, (iid, cap, sc) in enumerate(zip(s.image_ids, s.captions, summ["captions"]))]
    return (rows, {label(f"factuality.{k}", evidence_kind): v
                   for k, v in summ["metrics"].items()},
            {s.name: {"counts": summ["counts"]}})


def compute(judge: Judge, sets, evidence, cfg) -> "Judged":
    """The ``audit factuality`` metric: per-sentence and per-caption rows, three criteria."""
    from capaudit.judge.parts import computed

    return computed(rows, values, judge, sets, evidence, cfg)


def across(out: "Judged") -> dict:
    """What spans the sets: Welch's t-test of the first two sets' per-caption shares of
    factual sentences (their caption rows), run by the merge over every set's rows."""
    from capaudit.judge.stats import welch

    if len(out.items) < 2:
        return {}
    a, b = list(out.items)[:2]
    shares = {n: [r["score"] for r in out.items[n] if r["kind"] == "caption"] for n in (a, b)}
    return {"welch_caption_share": {"score": "per-caption share of factual sentences",
                                    "a": a, "b": b, **welch(shares[a], shares[b])}}


compute.needs_evidence = "image"
compute.across = across
compute.by_image = True   # chunks of whole images judge as the set (:mod:`.parts`)
