"""The ``gender-balance`` filter's step of ``filter run --shards`` (see :mod:`.steps`).

Its decision is the corpus's (which images go depends on every image's label and objects),
so two passes, as the sharded audit counts before it merges:

1. the count pass (:func:`count_shard`): each shard read once, with the filter pass's reader,
   into a :class:`~capaudit.filters.gender_balance.BalanceCounts` (its images in order, and,
   when needed, each image's predicted genders and mentioned objects), kept in its marker;
2. the driver adds the shards' counts in shard order, which gives the counts of the one set
   they make, and decides with the filter's own code and the run's seed
   (:meth:`~capaudit.filters.gender_balance.GenderBalanceFilter.balance`): the removed
   images (written once in columnar form) and the report; they key the filter pass, so a
   changed shard that changes the decision redoes every shard it touches;
3. the filter pass drops the captions of removed images, shard by shard, in bounded batches.

The labels and annotated objects are loaded on the driver only, as ``filter run SET`` loads
them; workers read the decision.
"""

from __future__ import annotations

from capaudit.filters.gender_balance import BalanceCounts, GenderBalanceFilter
from capaudit.filters.shards.gender_neutral_step import Labels, set_up_here, write_labels
from capaudit.filters.shards.steps import Driver as _Base

__all__ = ["Driver", "build", "begin", "count_shard"]


def _count(task: dict):
    from capaudit.filters.shards.coverage import read_shard
    from capaudit.filters.shards.task import shard_docs

    counts = BalanceCounts(**task["balance_count"])
    row0 = [0]

    def visit(records) -> None:
        docs, _ = shard_docs(records, row0[0], None)
        row0[0] += len(docs)
        for doc in docs:
            counts.add(doc)

    sha = read_shard(task, visit)
    return {"counts": counts.to_json()}, sha


def count_shard(task: dict) -> dict:
    """One shard's counts (or its marker's)."""
    from capaudit.filters.shards.coverage import counted_shard

    return counted_shard(task, _count, "balance_counts")


class Driver(_Base):
    """Labels and objects loaded here; the decision taken on the summed counts."""

    first_pass = staticmethod(count_shard)

    def worker_options(self) -> dict:
        return {**self.opts, "demographics": None, "instances": None, "chair_gt": None}

    def prepare(self, store, root: str) -> dict:
        from capaudit.core.storage.urls import shown_url
        from capaudit.io.markers import config_hash

        self.filt = GenderBalanceFilter(**self.opts)
        set_up_here(self.filt, store)
        empty = self.filt.counts()
        self.spec = {"votes": empty.votes is not None, "mentions": empty.mode}
        ref = self.opts.get("demographics")
        # the count pass depends on what it gathers (and the reader): its markers' key
        return {"kind": "balance-counts", "path": None, "namespace": None,
                "sha256": config_hash({"count": self.spec}),
                "source": shown_url(str(ref)) if ref is not None else "caption words"}

    def after_first(self, run_name: str, parts: list[dict], root: str):
        counts = BalanceCounts(**self.spec)
        for part in parts:                     # in shard order: the set's order of images
            counts.merge(BalanceCounts.from_json(part["counts"]))
        removed = self.filt.balance(counts)
        path, digest = write_labels(removed, root)
        decision = {"path": path, "sha256": digest, "none": removed.get(None),
                    "report": self.filt.report}
        return None, {"decision": decision}, [path]

    def task_fields(self) -> dict:
        return {"balance_count": self.spec}


def build(task: dict):
    """The filter that applies the driver's decision to a shard's captions."""
    from capaudit.filters.shards.task import worker_evidence

    class Decided(GenderBalanceFilter):
        """gender-balance with its corpus decision taken: caption by caption."""

        def apply(self, docs):
            for doc in docs:
                yield self.result(doc, self.removed)

    decision = task["decision"]
    filt = Decided(**task["options"])
    filt.removed = Labels(worker_evidence(decision), decision["none"])
    filt.report = decision["report"]
    return filt


def begin(filt) -> None:
    """The report is the corpus's (the decision's): nothing to reset."""
