"""``critique-revise``: a judge labels each sentence, flagged ones are critiqued and rewritten.

Sentences are scored by the one factuality scorer of the judge layer
(:mod:`capaudit.judge.factuality`: the same prompt, strict parser, format
retry and backends as ``capaudit audit factuality``), so a revision's gain is
measured with the same judge that flagged it. The judge is built from
``judge_backend`` (``openai`` for an OpenAI-compatible server: vLLM,
llama.cpp, Ollama, a hosted API; ``transformers`` for a local model folder),
or given as a ``chat(messages) -> str`` callable (wrapped as a backend).
The reviser is a chat callable over the same backend registry
(:func:`capaudit.llm.chat.make_chat`).

Per caption, in order:

1. **score**: for sentence ``i`` the judge gets the image (when ``images``
   locates it), the annotated objects (when evidence is given), the earlier
   sentences ``0..i-1`` as context and sentence ``i``; it answers yes/no and a
   critique (``configs/prompts/judge_factuality.txt``). Score 1.0 supported, 0.0 not;
2. **decide**: a supported sentence is kept. An unsupported one goes to the
   reviser (``critique_revise.txt``, possibly another model) with the context
   (as already revised), the sentence and the critique, and must return the
   sentence with minimal edits: it is logged ``revise`` with original,
   critique and revision; ``DELETE`` or an empty answer drops it. With
   ``revise=False`` the sentence is only flagged.

A judge answer that cannot be parsed (after the one format retry), or a
failed call, keeps the sentence flagged ``judge-error`` (so it can go to human review); if every call fails
the run stops with an error naming the server.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from capaudit.errors import CapauditError, InputError
from capaudit.filters.declared import DEFAULTS
from capaudit.filters.evidence import evidence_files, given_kind, load_evidence
from capaudit.llm.base import GenRequest
from capaudit.llm.chat import ChatFn, make_chat
from capaudit.io.images import find_image
from capaudit.filters.base import (CaptionDoc, CaptionResult, Decision, Filter, FilterContext,
                                   SentenceScore)

__all__ = ["CritiqueReviseFilter", "load_prompt", "ChatFn"]

def _judge_prompt_override(prompt_dir) -> dict:
    """``--prompt-dir`` may hold the judge's template too (``judge_factuality.txt``)."""
    p = Path(prompt_dir) / "judge_factuality.txt" if prompt_dir else None
    return {"judge_factuality": str(p)} if p is not None and p.is_file() else {}


def load_prompt(kind: str, prompt_dir: str | Path | None = None) -> str:
    """``critique_{kind}.txt`` from ``prompt_dir``; without it, looked up like every template
    (``./configs/prompts``, then the project's, shipped in the package)."""
    from capaudit.enrich.adapters.base import load_prompt as load_template

    if prompt_dir is None:
        return load_template(f"critique_{kind}")
    path = Path(prompt_dir) / f"critique_{kind}.txt"
    if not path.exists():
        raise InputError("prompt file not found", path=path,
                         fix=f"write critique_{kind}.txt there or drop --prompt-dir")
    return path.read_text(encoding="utf-8")


def clean_revision(text: str) -> str | None:
    """The reviser's sentence, or None for DELETE / empty."""
    t = (text or "").strip()
    t = re.sub(r"^(revised( sentence)?|sentence)\s*:\s*", "", t, flags=re.I).strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        t = t[1:-1].strip()
    if t.startswith("<<") and t.endswith(">>"):
        t = t[2:-2].strip()
    if not t or t.upper().rstrip(".") == "DELETE":
        return None
    return t.splitlines()[0].strip()


# -- the filter -----------------------------------------------------------------
class CritiqueReviseFilter(Filter):
    """A judge labels each sentence as supported or not; flagged ones are critiqued and rewritten."""

    name = "critique-revise"
    version = "1"
    defaults: Mapping = DEFAULTS["critique-revise"]  # declared in capaudit.filters.declared

    def __init__(self, judge: ChatFn | None = None, reviser: ChatFn | None = None, **options):
        super().__init__(**options)
        self.judge, self.reviser = judge, reviser
        self.evidence: Mapping[int, Mapping[str, float]] | None = None
        self._lock = threading.Lock()
        self.calls = {"judge": 0, "revise": 0, "errors": 0}

    def setup(self, context: FilterContext | None = None) -> None:
        from capaudit.judge.core import Judge, JudgeConfig

        o = self.options
        if self.judge is None:
            self.scorer = Judge(JudgeConfig(
                backend=o["judge_backend"], model=o["judge_model"], url=o["judge_url"],
                api_key_env=o["api_key_env"], timeout_s=float(o["timeout_s"]), max_retries=2,
                concurrency=int(o["concurrency"]), cache=None,
                params={"temperature": 0.0, "max_tokens": 64},
                prompts=_judge_prompt_override(o["prompt_dir"])))
        else:  # a chat callable: the same scorer over it
            from capaudit.judge.chatfn import ChatFnBackend

            self.scorer = Judge(JudgeConfig(backend="chat", model="callable", cache=None,
                                            logprobs=False),
                                backend=ChatFnBackend(chat=self.judge))
        if self.reviser is None:
            if self.judge is not None and not (o["reviser_backend"] or o["reviser_url"]
                                               or o["reviser_model"]):
                self.reviser = self.judge
            else:
                self.reviser = make_chat(o["reviser_backend"] or o["judge_backend"],
                                         o["reviser_model"] or o["judge_model"],
                                         base_url=o["reviser_url"] or o["judge_url"],
                                         api_key_env=o["api_key_env"],
                                         timeout_s=float(o["timeout_s"]), max_retries=2)
        if o["images"] and not Path(o["images"]).is_dir():  # else every image is "not attached"
            raise InputError(f"--images {o['images']}: no such folder",
                             fix="give the folder that holds the set's image files")
        from capaudit.judge.evidence import refuse_text_only

        refuse_text_only(self.scorer.backend, o["images"], o["judge_backend"])
        self.prompts = {"revise": load_prompt("revise", o["prompt_dir"])}
        kind = given_kind(o)
        if kind:
            self.evidence = load_evidence(kind, evidence_files(o)[kind],
                                          context.store if context else None)

    def _evidence_text(self, doc: CaptionDoc) -> str:
        if self.evidence is None:
            return "(not given)"
        objs = self.evidence.get(doc.image_id) if doc.image_id is not None else None
        if objs is None:
            return "(unknown)"
        return ", ".join(sorted(objs)) or "(none)"

    def _messages(self, kind: str, doc: CaptionDoc, image, **fields) -> list:
        text = self.prompts[kind].format_map({**fields, "evidence": self._evidence_text(doc)})
        request = GenRequest(text, system="You are a careful visual fact checker.")
        if image is not None:   # (bytes, MIME type): sent as a data: URL part
            request.image, request.image_mime = image
        return request.messages()

    def _call(self, kind: str, fn: ChatFn, messages: list) -> str | None:
        try:
            out = fn(messages)
        except CapauditError:
            raise
        except OSError:  # network / server failure (ConnectionError, timeout): recorded, flagged
            with self._lock:
                self.calls["errors"] += 1
            return None
        with self._lock:
            self.calls[kind] += 1
        return out

    def score(self, doc: CaptionDoc) -> list[SentenceScore]:
        return self.score_many([doc])[0]

    def score_many(self, docs: list[CaptionDoc]) -> list[list[SentenceScore]]:
        """All sentences of all captions in one batch through the factuality scorer."""
        from capaudit.judge.factuality import sentence_tasks

        tasks, where, images = [], [], []
        for d, doc in enumerate(docs):
            image = find_image(doc, self.options["images"])
            images.append(image)
            ev = ("Evidence: the attached image." if image else "Evidence: no image is attached.")
            if self.evidence is not None:
                ev += f"\nAnnotated objects in the image: {self._evidence_text(doc)}"
            sents = [s.strip() for s in doc.sentences]
            tasks += sentence_tasks(sents, ev, image)
            where += [(d, i) for i in range(len(sents))]
        out: list[list[SentenceScore]] = [[] for _ in docs]
        for (d, i), v in zip(where, self.scorer.run(tasks)):
            image = images[d]
            with self._lock:
                self.calls["judge" if v.status in ("ok", "unparsed") else "errors"] += 1
            if v.status == "ok":
                sup, crit = v.value
                out[d].append(SentenceScore(i, 1.0 if sup else 0.0,
                                            {"supported": sup, "critique": crit, "image": image,
                                             "p_yes": v.p_yes}))
            else:
                err = "judge call failed" if v.status == "failed" else \
                    f"cannot parse judge answer: {(v.text or '')[:80]!r}"
                out[d].append(SentenceScore(i, None, {"error": err, "image": image}))
        return out

    def decide(self, doc: CaptionDoc, scores: list[SentenceScore]) -> CaptionResult:
        decisions = []
        context: list[str] = []   # the sentences before, as revised: the reviser's context
        for s, text in zip(scores, doc.sentences):
            decision = self._decide_sentence(doc, s, text.strip(), context)
            decisions.append(decision)
            if decision.action != "drop":
                context.append(decision.revised or text.strip())
        return CaptionResult(doc, decisions)

    def _decide_sentence(self, doc: CaptionDoc, s: SentenceScore, text: str,
                         context: list[str]) -> Decision:
        f, i = s.facts, s.sentence_idx
        if "error" in f:
            return Decision(i, "flag", f"judge-error: {f['error']}")
        if f["supported"]:
            return Decision(i, "keep", score=s.score)
        crit = f["critique"] or "not supported by the image"
        if not self.options["revise"]:
            return Decision(i, "flag", "unsupported (judge)", critique=crit, score=s.score)
        ans = self._call("revise", self.reviser,
                         self._messages("revise", doc, f["image"], context=" ".join(context),
                                        sentence=text, critique=crit))
        if ans is None:
            return Decision(i, "flag", "reviser-error", critique=crit, score=s.score)
        new = clean_revision(ans)
        if new is None:
            return Decision(i, "drop", "unsupported (judge); reviser deleted it", critique=crit,
                            score=s.score)
        if new == text:
            return Decision(i, "flag", "unsupported (judge); reviser left it unchanged",
                            critique=crit, score=s.score)
        return Decision(i, "revise", "unsupported (judge); revised", revised=new, critique=crit,
                        score=s.score)

    def apply(self, docs: Iterable[CaptionDoc]) -> Iterator[CaptionResult]:
        docs = list(docs)
        n_workers = max(1, int(self.options["concurrency"]))
        try:
            scores = self.score_many(docs)
        except InputError as exc:
            if "did not answer" in str(exc):  # one fix: ours, not the judge layer's too
                why = str(exc).removesuffix(f" (fix: {exc.fix})") if exc.fix else str(exc)
                raise InputError(f"every call to the judge failed ({why})",
                                 fix=self._judge_fix()) from None
            raise
        pairs = list(zip(docs, scores))
        if n_workers == 1 or len(docs) <= 1:
            results = [self.decide(d, s) for d, s in pairs]
        else:
            with ThreadPoolExecutor(max_workers=n_workers) as pool:
                results = list(pool.map(lambda p: self.decide(*p), pairs))  # keeps input order
        if docs and self.calls["errors"] and not (self.calls["judge"] or self.calls["revise"]):
            raise InputError(f"every call to the judge failed ({self.calls['errors']} calls)",
                             fix=self._judge_fix())
        self.report = {"calls": dict(self.calls), "judge": self.scorer.summary()}
        yield from results

    def _judge_fix(self) -> str:
        o = self.options
        if o["judge_backend"] == "openai":
            return (f"check that an OpenAI-compatible server answers at {o['judge_url']} "
                    "(--judge-url)")
        return f"check the {o['judge_backend']} judge model '{o['judge_model']}' (--judge-model)"
