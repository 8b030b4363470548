"""The hallucination filter's judge: asked only about what the offline evidence leaves undecided.

Why only those: the CHAIR ground truth, the instances, a detector and the reference texts
decide most sentences for the cost of a table look-up; a judge (an LLM or VLM through the
judge layer, :mod:`capaudit.judge.core`: a local model or an OpenAI-compatible server) costs
a call per sentence. So ``judge=`` names which sentences it is asked about, and no other
sentence ever reaches it:

``undecided``
    a sentence the evidence keeps although it names an object no evidence can judge (logged
    ``undecided: tree->tree``: an object outside the vocabulary the evidence names, e.g. a
    non-COCO object in object mode ``visual`` on an image without references);
``kept``
    every sentence the evidence keeps on an image it covers (also those that name no object
    of the vocabulary at all: the objects it cannot see).

A sentence with an unsupported object, one dropped with its caption, a non-visual one
flagged for review and a caption whose image the evidence does not cover are decided
already and never sent. The question is the factuality judge's (``judge_factuality``: the
sentence, the evidence text, the image when ``images`` locates it), without the caption's
other sentences, so each answer belongs to one (sentence, image evidence, judge) and the
judge layer's response cache answers it again for free: a rerun, or a run that failed
midway, asks only what was never answered. ``max_calls`` / ``max_cost`` cap the calls.

The verdict becomes evidence like any other: ``no`` makes the sentence's undecided objects
(or the sentence) unsupported, ``[judge: <its critique>]`` in the log's reason and the
critique in the log's ``critique`` column; ``yes`` makes them supported ``[judge: yes]``;
an answer that cannot be read, a failed call or one the caps held back leaves the sentence
kept, its reason saying so (``[judge: not-judged ...]``).
"""

from __future__ import annotations

from collections import Counter

from capaudit.errors import InputError

__all__ = ["JUDGE_SCOPES", "undecided_judge", "UndecidedJudge"]

JUDGE_SCOPES = ("undecided", "kept")


def undecided_judge(options: dict):
    """The filter's judge for ``options`` (None when ``judge`` is not set: the default)."""
    scope = options.get("judge")
    if not scope:
        return None
    if scope not in JUDGE_SCOPES:
        raise InputError(f"unknown judge '{scope}' for hallucination",
                         fix=f"use one of {', '.join(JUDGE_SCOPES)} (or leave --judge out)")
    return UndecidedJudge(options)


def _judge_config(o: dict):
    from capaudit.judge.core import JudgeConfig
    from capaudit.judge.runner import resolve_config

    prices = resolve_config(None, {})["judge"].get("prices") or {}   # configs/judge.yaml
    return JudgeConfig(backend=o["judge_backend"], model=o["judge_model"], url=o["judge_url"],
                       api_key_env=o["api_key_env"], timeout_s=float(o["timeout_s"]),
                       max_retries=2, concurrency=int(o["concurrency"]),
                       max_calls=o["max_calls"], max_cost=o["max_cost"], prices=prices,
                       logprobs=False, params={"temperature": 0.0, "max_tokens": 64})


class UndecidedJudge:
    """Asks the judge about one batch's candidate sentences and turns its verdicts into the
    sentences' facts (see the module docstring)."""

    def __init__(self, options: dict):
        from capaudit.judge.core import Judge

        self.scope, self.images = options["judge"], options.get("images")
        self.judge = Judge(_judge_config(options))   # a missing model or extra fails now
        from capaudit.judge.evidence import refuse_text_only

        refuse_text_only(self.judge.backend, self.images, options["judge_backend"])
        self.counts: Counter = Counter()

    def anew(self) -> "UndecidedJudge":
        """The same judge with its counts, time and caps starting again (a sharded run's
        next shard: its report is the shard's), its backend kept: a local model loads once
        per worker, not once per shard."""
        self.counts = Counter()
        self.judge.restart()
        return self

    def candidates(self, results, scored) -> list[tuple]:
        """``(caption, sentence)`` index pairs the evidence keeps and the scope asks about."""
        out = []
        for c, (res, (doc, scores)) in enumerate(zip(results, scored)):
            if scores and scores[0].facts.get("no_evidence"):
                continue
            for d, s in zip(res.decisions, scores):
                if d.action == "keep" and (self.scope == "kept" or s.facts.get("undecided")):
                    out.append((c, d.sentence_idx))
        return out

    def evidence_text(self, filt, doc) -> str:
        """What the judge is told besides the sentence: the image (when attached), the objects
        the evidence finds in it, the image's reference captions."""
        lines = []
        support = filt.evidence.get(doc.image_id) if doc.image_id is not None else None
        named = sorted(c for c, v in (support or {}).items() if v >= filt.threshold)
        lines.append("Objects the evidence finds in the image: " + (", ".join(named) or "(none)"))
        refs = getattr(filt.evidence, "refs", {}).get(doc.image_id)
        if refs:
            lines.append("Reference captions of the image: " + " | ".join(refs))
        return "\n".join(lines)

    def ask(self, filt, docs, pairs) -> dict:
        """The verdicts of ``pairs``, one question per distinct (sentence, evidence, image)."""
        from capaudit.io.images import find_image
        from capaudit.judge.factuality import sentence_tasks

        tasks, where, index = [], {}, {}
        for c, si in pairs:
            doc = docs[c]
            image = find_image(doc, self.images) if self.images else None
            ev = ("Evidence: the attached image.\n" if image else
                  "Evidence: no image is attached.\n") + self.evidence_text(filt, doc)
            sent = doc.sentences[si].strip()
            key = (sent, ev, image)
            if key not in index:
                index[key] = len(tasks)
                tasks += sentence_tasks([sent], ev, image)
            where[(c, si)] = index[key]
        verdicts = self.judge.run(tasks) if tasks else []
        self.counts["sentences"] += len(pairs)
        self.counts["questions"] += len(tasks)
        return {p: verdicts[i] for p, i in where.items()}

    def settle(self, filt, batch) -> list:
        """Score and decide ``batch`` as the filter does, ask the judge about the candidates,
        and decide again with its verdicts (the filter's counts as one decision made them)."""
        saved = filt._counts.copy()
        scored = [(doc, filt.score(doc)) for doc in batch]
        results = [filt.decide(doc, scores) for doc, scores in scored]
        pairs = self.candidates(results, scored)
        if not pairs:
            return results
        verdicts = self.ask(filt, batch, pairs)
        critiques = {}
        for (c, si), v in verdicts.items():
            critiques[(c, si)] = self.apply_verdict(scored[c][1][si], v)
        filt._counts = saved
        results = [filt.decide(doc, scores) for doc, scores in scored]
        for (c, si), crit in critiques.items():
            for d in results[c].decisions if crit else ():
                if d.sentence_idx == si:
                    d.critique = crit
        return results

    def apply_verdict(self, score, v) -> str | None:
        """One verdict into the sentence's facts; the critique of a ``no`` (else None)."""
        facts = score.facts
        named = ", ".join(facts.pop("undecided", None) or ["sentence"])
        if v.status == "ok":
            supported, crit = v.value
            self.counts["supported" if supported else "unsupported"] += 1
            if supported:
                facts["supported"].append(f"{named} [judge: yes]")
                return None
            crit = " ".join((crit or "not true of the image").split())
            facts["unsupported"].append(f"{named} [judge: {crit}]")
            score.score = 0.0
            return crit
        self.counts[v.status] += 1
        why = v.status + (f", {v.error}" if v.error else "")
        facts["undecided"] = [f"{named} [judge: {why}]"]
        return None

    @property
    def report(self) -> dict:
        """The judge's part of the filter's report: what it was asked, what it answered, what
        it cost (calls, cache hits), and its identity."""
        s = self.judge.summary()
        return {"scope": self.scope, **{k: self.counts[k] for k in
                                       ("sentences", "questions", "supported", "unsupported",
                                        "unparsed", "failed", "not-judged")},
                "calls": s["calls"], "cache_hits": s["cache_hits"], "stopped": s.get("stopped"),
                "judge_id": s["judge"]["judge_id"], "model": s["judge"]["model"],
                "backend": s["judge"]["backend"]}
