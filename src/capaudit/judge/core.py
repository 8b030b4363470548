"""The judge layer: the one place where a judged metric talks to a model.

Why one layer: every judged metric (sentence factuality, DCScore, CAPability,
FaithScore, CapScore, the critique-revise filter) needs the same five things,
and each public tool re-implements them differently: render a prompt template
(``configs/prompts/judge_*.txt``, the user's wording wins), send it through a
registered backend (:mod:`capaudit.llm`: ``openai`` or
``transformers``, with their retries and the response cache), parse the
answer *strictly*, ask once more with a format reminder when it does not
parse, and otherwise record the item as ``unparsed`` -- never counted as
correct or wrong, always counted and reported.

Cost is known before and capped during a run: ``dry_run`` builds no backend
(no network at all) and only counts calls and estimated tokens, priced from
the user-editable table in ``configs/judge.yaml``; ``max_calls`` /
``max_cost`` stop sending once the next chunk would cross the cap. The cost so far
is the server's reported usage, priced, and a reply's estimate where the server reported
none or figures flagged as ignored (``stats.spent``): a server that reports nothing never
lets a run spend past the cap. Format retries are held to both caps. Items not
sent are ``not-judged``; what was judged is cached, so a rerun continues.

Every verdict belongs to one judge identity (:meth:`Judge.identity`: backend,
model, parameters, prompt hashes, evidence kind); the store keys every row
and metric by its ``judge_id``, so answers of two judges are never mixed.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict
from typing import Any

from capaudit.errors import InputError
from capaudit.judge.config import (STATUSES, JudgeConfig, JudgeStats, ParseError, Task,
                                   Unanswered, Verdict, priced)
from capaudit.judge.parse import p_yes_from_logprobs  # re-exported
from capaudit.judge.parse import verdict_of

__all__ = ["JudgeConfig", "Task", "Verdict", "Judge", "ParseError", "p_yes_from_logprobs",
           "STATUSES", "JudgeStats", "judge_id"]


def judge_id(identity: dict) -> str:
    """The short hash naming a judge identity (its fields, ``judge_id`` itself left out)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


class Judge:
    """Renders, sends, parses, retries once, caps; see the module docstring."""

    patient = False   # True: a judge that answered nothing so far is not stopped (a chunk)

    def __init__(self, cfg: JudgeConfig, backend=None):
        if cfg.evidence not in ("image", "reference-captions"):
            raise InputError(f"unknown evidence '{cfg.evidence}'",
                             fix="use --evidence image or --evidence reference-captions")
        self.cfg, self._backend = cfg, backend
        self.stats = JudgeStats()
        self._templates: dict[str, tuple[str, str]] = {}
        self._t0: float | None = None   # wall time counts from the first question
        self._price = cfg.prices.get(cfg.model)
        if cfg.max_cost is not None and self._price is None:
            raise InputError(f"--max-cost needs a price for the model '{cfg.model}'",
                             fix="add it under judge.prices in configs/judge.yaml")
        if cfg.backend not in ("openai", "transformers") and backend is None:
            from capaudit.llm.base import BACKENDS

            BACKENDS.get(cfg.backend)  # unknown name: one line with "did you mean"
            raise InputError(f"the '{cfg.backend}' backend cannot judge",
                             fix="use --judge-backend openai or transformers")
        if not cfg.dry_run:
            self.backend  # build now: a missing model or extra fails before any work

    def restart(self) -> None:
        """Counts and wall time from zero (a sharded run's next shard: its report is the
        shard's); the backend, a loaded model, is kept."""
        self.stats, self._t0 = JudgeStats(), None

    # -- plumbing --------------------------------------------------------------
    @property
    def backend(self):
        if self.cfg.dry_run:
            raise RuntimeError("a dry run never builds a backend")
        if self._backend is None:
            from capaudit.llm.base import make_backend

            c = self.cfg
            opts: dict[str, Any] = {"model": c.model, "params": self.params()}
            if c.backend == "openai":
                opts.update(base_url=c.url, api_key_env=c.api_key_env,
                            concurrency=c.concurrency, timeout_s=c.timeout_s,
                            deadline_s=c.deadline_s, max_retries=c.max_retries)
            self._backend = make_backend(c.backend, opts, c.cache_path())
            if c.max_calls is not None and hasattr(self._backend, "budget"):
                from capaudit.llm.base import RequestBudget

                # a hard cap: every HTTP attempt takes one, retries after a 429/5xx included
                self._backend.budget = RequestBudget(c.max_calls)
        return self._backend

    def params(self) -> dict:
        p = dict(self.cfg.params)
        if self.cfg.logprobs and self.cfg.backend == "openai":
            p.setdefault("logprobs", True)
            p.setdefault("top_logprobs", 5)
        return p

    def template(self, name: str) -> tuple[str, str]:
        """(text, hash) of a prompt template; looked up once."""
        if name not in self._templates:
            from capaudit.enrich.adapters.base import load_prompt, prompt_hash

            text = load_prompt(name, self.cfg.prompts.get(name))
            self._templates[name] = (text, prompt_hash(text))
        return self._templates[name]

    def identity(self) -> dict:
        """What makes two verdicts comparable: same id = same backend, model, parameters,
        prompt wording and evidence kind."""
        c = self.cfg
        ident = {"backend": c.backend, "model": c.model, "params": self.params(),
                 "prompts": {k: v[1] for k, v in sorted(self._templates.items())},
                 "evidence": c.evidence}
        ident["judge_id"] = judge_id(ident)
        return ident

    def render(self, task: Task, reminder: str | None = None) -> str:
        from capaudit.enrich.adapters.base import render

        text = render(self.template(task.prompt)[0], **task.fields)
        return text + ("\n\n" + reminder if reminder else "")

    def _request(self, task: Task, reminder: str | None = None):
        from capaudit.llm.base import GenRequest

        img, mime = task.image if task.image else (None, "image/jpeg")
        return GenRequest(self.render(task, reminder), img, mime)

    def _cost(self, tin: float, tout: float) -> float | None:
        return priced(self._price, tin, tout)

    def _estimate(self, task: Task) -> tuple[int, int]:
        tin = math.ceil(len(self.render(task)) / self.cfg.chars_per_token)
        return tin + (self.cfg.image_tokens if task.image else 0), task.expect_out

    # -- the loop ----------------------------------------------------------------
    def run(self, tasks: list[Task]) -> list[Verdict]:
        """Verdicts in task order (never raises for one bad answer)."""
        if self._t0 is None:
            self._t0 = time.perf_counter()
        if self.cfg.dry_run:
            return [self._dry(t) for t in tasks]
        out: list[Verdict | None] = [None] * len(tasks)
        todo = list(range(len(tasks)))
        chunk = max(1, self.cfg.concurrency) * 4
        for start in range(0, len(todo), chunk):
            if self.stats.stopped:
                break
            idx = self._affordable(tasks, todo[start:start + chunk])
            if idx:
                for i, v in zip(idx, self._send([tasks[i] for i in idx])):
                    out[i] = v
            if len(idx) < len(todo[start:start + chunk]):
                break
        for i, v in enumerate(out):
            if v is None:
                out[i] = Verdict("not-judged", error=self.stats.stopped)
                self.stats.not_judged += 1
        self.stats.seconds = time.perf_counter() - self._t0
        return out  # type: ignore[return-value]

    def _dry(self, task: Task) -> Verdict:
        s = self.stats
        if self._dry_cached(task):  # already paid for: a rerun reads it from the cache
            s.est_cached += 1
            return Verdict("dry-run", cached=True)
        tin, tout = self._estimate(task)
        s.est_calls += 1
        s.est_tokens_in += tin
        s.est_tokens_out += tout
        s.est_cost = self._cost(s.est_tokens_in, s.est_tokens_out)
        return Verdict("dry-run")

    def _dry_cached(self, task: Task) -> bool:
        from capaudit.llm.base import in_cache

        c = self.cfg
        return in_cache(c.cache_path(), c.backend, c.model, self.params(), self._request(task))

    def _is_cached(self, task: Task) -> bool:
        b = self.backend
        return b.cache is not None and b.cache.get(b.cache_key(self._request(task))) is not None

    def _affordable(self, tasks: list[Task], idx: list[int]) -> list[int]:
        """The prefix of ``idx`` the caps allow (cache hits are free)."""
        c, s = self.cfg, self.stats
        if c.max_calls is None and c.max_cost is None:
            return idx
        keep, calls, cost = [], s.calls, s.spent  # reported usage, estimates where none
        for i in idx:
            if not self._is_cached(tasks[i]):
                tin, tout = self._estimate(tasks[i])
                if c.max_calls is not None and calls + 1 > c.max_calls:
                    s.stopped = f"max-calls {c.max_calls} reached"
                    break
                est = self._cost(tin, tout) or 0.0
                if c.max_cost is not None and cost + est > c.max_cost:
                    s.stopped = f"max-cost {c.max_cost} reached"
                    break
                calls, cost = calls + 1, cost + est
            keep.append(i)
        return keep

    def _send(self, tasks: list[Task]) -> list[Verdict]:
        first = self._generate([self._request(t) for t in tasks], tasks)
        verdicts = [verdict_of(t, r) for t, r in zip(tasks, first)]
        again = [i for i, v in enumerate(verdicts) if v.status == "unparsed"]
        refused = False   # a format retry the request cap did not let out
        again = self._retries_affordable(tasks, again)
        if again:
            self.stats.format_retries += len(again)
            reqs = [self._request(tasks[i], "Your previous answer could not be read. "
                                  + getattr(tasks[i].parse, "reminder", "Follow the answer format "
                                            "exactly.")) for i in again]
            for i, r in zip(again, self._generate(reqs, [tasks[i] for i in again])):
                v = verdict_of(tasks[i], r)
                refused = refused or v.status == "not-judged"
                verdicts[i] = v if v.status not in ("failed", "not-judged") else verdicts[i]
        if refused or any(v.status == "not-judged" for v in verdicts):
            self.stats.stopped = f"max-calls {self.cfg.max_calls} reached"
        for v in verdicts:
            setattr(self.stats, v.status.replace("-", "_"),
                    getattr(self.stats, v.status.replace("-", "_")) + 1)
        if self.stats.failed and not (self.stats.ok or self.stats.unparsed or self.patient):
            err = next(v.error for v in verdicts if v.error)
            where = self.cfg.url if self.cfg.backend == "openai" else self.cfg.model
            from capaudit.core.redact import redact

            raise Unanswered(redact(f"the judge did not answer at {where} ({str(err)[:160]})"),
                             fix="start the server or correct --judge-url / --judge-model")
        return verdicts

    def _retries_affordable(self, tasks: list[Task], again: list[int]) -> list[int]:
        """The format retries ``--max-cost`` still lets out (``--max-calls`` is held by the
        backend's request budget)."""
        c, s = self.cfg, self.stats
        if c.max_cost is None:
            return again
        keep, cost = [], s.spent
        for i in again:
            cost += self._cost(*self._estimate(tasks[i])) or 0.0
            if cost > c.max_cost:
                s.stopped = f"max-cost {c.max_cost} reached"
                break
            keep.append(i)
        return keep

    def _generate(self, reqs, tasks: list[Task]):
        b = self.backend
        before = dict(b.stats.__dict__)
        res = self._guarded(reqs)
        s = self.stats
        for r, t in zip(res, tasks):  # what --max-cost counts: the server's usage where given
            if not r.cached and r.error is None:
                given = (r.tokens_in or r.tokens_out) and not r.bad_usage
                s.spent += self._cost(*((r.tokens_in, r.tokens_out) if given
                                        else self._estimate(t))) or 0.0
        s.calls += b.stats.requests - before["requests"]
        s.cache_hits += b.stats.cache_hits - before["cache_hits"]
        s.tokens_in += b.stats.tokens_in - before["tokens_in"]
        s.tokens_out += b.stats.tokens_out - before["tokens_out"]
        s.usage_ignored += b.stats.usage_ignored - before.get("usage_ignored", 0)
        s.cost = self._cost(s.tokens_in, s.tokens_out)
        return res

    def _guarded(self, reqs):
        """The backend's results; a reply the backend itself chokes on (a 200 that is not
        JSON) fails that request only, never the batch."""
        from capaudit.llm.base import GenResult

        try:
            return self.backend.generate(reqs)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            if len(reqs) > 1:
                return [r for req in reqs for r in self._guarded([req])]
            return [GenResult(None, error=f"malformed reply ({exc.__class__.__name__}: "
                                          f"{str(exc)[:80]})")]

    def summary(self) -> dict:
        out = asdict(self.stats)
        out["judge"] = self.identity()
        out["dry_run"] = self.cfg.dry_run
        return out

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
