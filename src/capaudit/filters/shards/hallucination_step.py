"""The ``hallucination`` filter's step of ``filter run --shards`` (see :mod:`.steps`).

Workers read the run's evidence from its columnar file (:mod:`.evidence_file`) and the
reference texts, when given, from a local file or, ``--reference-col``, from each record
(:mod:`.record_references`, batch by batch in the shard task); the first pass is the coverage pass
(:mod:`.coverage`), held to the filter's coverage rule before any cleaned shard is written.
"""

from __future__ import annotations

from capaudit.filters.shards.steps import NO_FILES, Driver as _Base

__all__ = ["Driver", "build", "begin", "warm"]


class Driver(_Base):
    """The evidence written once, the coverage counted shard by shard and held."""

    @property
    def first_pass(self):
        from capaudit.filters.shards.coverage import coverage_shard

        return coverage_shard

    def worker_options(self) -> dict:
        from capaudit.filters.reference_evidence import shard_references

        return {**self.opts, **NO_FILES, "evidence": self.kind,
                "references": shard_references(self.opts, self.kind)}  # a local file per worker

    def prepare(self, store, root: str) -> dict:
        from capaudit.filters.shards.evidence_file import run_evidence

        self.evidence = run_evidence(store, self.kind, self.opts, root)
        refs = self.refs = self.worker_options()["references"]   # after_first reads them
        if refs:   # the coverage pass counts the images they name: its markers keyed by them
            from capaudit.io.annotation_store import source_sha256

            self.evidence["references_sha256"] = source_sha256(None, refs)
        return self.evidence

    def after_first(self, run_name: str, parts: list[dict], root: str):
        from capaudit.filters.shards.coverage import check_coverage

        ev, refs = self.evidence, self.refs
        joined = [p.get("references_joined") for p in parts]
        if refs and parts and None not in joined and not sum(joined):
            from capaudit.filters.shards.coverage import reference_ids
            from capaudit.filters.reference_sources import unjoined

            raise unjoined(sum(p["n_with_ids"] for p in parts), "the shards",
                           dict.fromkeys(reference_ids(refs, ev.get("references_sha256"))),
                           refs)
        cov = check_coverage(run_name, parts, self.kind, ev["namespace"],
                             float(self.opts["min_coverage"]), bool(self.opts["allow_partial"]))
        return cov, {}, []


def build(task: dict):
    """The filter on the worker's copy of the evidence (and references, as setup adds them)."""
    from capaudit.filters.base import FILTERS
    from capaudit.filters.shards.task import worker_evidence

    ev = task["evidence"]
    filt = FILTERS.get(task["filter"])(worker_evidence(ev), **task["options"])
    filt.source = ev["source"]
    from capaudit.filters.reference_evidence import add_references, wants_wrapper

    if wants_wrapper(task["options"]):
        filt.evidence = add_references(filt.evidence, task["options"])   # as setup does
    return filt


def begin(filt) -> None:
    """Per shard: the filter's counts start again (its report is the shard's); the coverage
    was held on the whole corpus already."""
    from capaudit.filters.base import FilterContext

    filt.setup(FilterContext(guarded=True))


def warm(options: dict) -> None:
    """A new worker's warm-up (:func:`.steps.warm_worker`): the filter's modules, what its
    setup reads, and the parser only when these options parse (as its setup asks)."""
    from capaudit.filters.base import FILTERS
    import capaudit.io.annotation_store  # noqa: F401 (setup's source_sha256: the store, DuckDB)

    if FILTERS.get("hallucination")(None, **options).parses:
        from capaudit.filters.parse import warm_parser

        warm_parser()
