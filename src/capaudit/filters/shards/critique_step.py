"""The ``critique-revise`` filter's step of ``filter run --shards`` (see :mod:`.steps`).

It decides caption by caption, so one pass. The judge and the reviser (an LLM backend: an
OpenAI-compatible server, a local model) are built once per worker, as ``enrich`` builds
its context once per process, and serve every shard the worker filters; their counts start
again with each shard (:func:`begin`), so a shard's summary holds its own calls and the
run's is their sum (:mod:`.merge`). The annotated objects the judge is shown, when given,
are resolved on the driver as ``filter run SET`` resolves them and written once in columnar
form; image ids are looked up as the set path looks them up (no namespace guard: the
decisions are the set's).
"""

from __future__ import annotations

from capaudit.filters.shards.steps import NO_FILES, Driver as _Base

__all__ = ["Driver", "build", "begin"]


class Driver(_Base):
    """The evidence, when given, written once; nothing else before the filter pass."""

    def worker_options(self) -> dict:
        return {**self.opts, **NO_FILES, "evidence": None}

    def prepare(self, store, root: str) -> dict:
        from capaudit.filters.evidence import given_kind
        from capaudit.filters.shards.evidence_file import run_evidence

        kind = given_kind(self.opts)
        if kind is None:
            return super().prepare(store, root)
        return {**run_evidence(store, kind, self.opts, root), "namespace": None}


def build(task: dict):
    """The filter with its judge and reviser, set up once in this worker."""
    from capaudit.filters.base import FilterContext
    from capaudit.filters.critique import CritiqueReviseFilter
    from capaudit.filters.shards.task import worker_evidence

    filt = CritiqueReviseFilter(**task["options"])
    filt.setup(FilterContext())
    if task["evidence"]["path"]:
        filt.evidence = worker_evidence(task["evidence"])
    return filt


def begin(filt) -> None:
    """The calls and the judge's counts of this shard alone (the backend stays up)."""
    filt.calls = dict.fromkeys(filt.calls, 0)
    filt.scorer.restart()
    filt.report = {"calls": dict(filt.calls), "judge": filt.scorer.summary()}
