"""``audit run --shards``: a web-scale set audited shard by shard, resumably, merged exactly.

:mod:`.run` is the audit's step of the one runner (:mod:`capaudit.runner`): its shard function,
:mod:`.outputs` is what a shard keeps beside its metric state (details, coverage),
:mod:`.state_io` writes and reads shard states without pickles, :mod:`.sums` keeps
per-shard replicate sums, and :mod:`.merge` turns the done shards into one result.
"""
