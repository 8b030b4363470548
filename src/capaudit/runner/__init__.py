"""The one runner of sharded work: plan -> tasks -> run -> mark -> merge.

``audit run --shards``, ``filter run --shards``, ``enrich`` and ``annotations detect`` are one
job: a pure function per shard, run on local processes or Ray (:mod:`capaudit.executors`),
each shard's output written whole and then marked done, keyed by the configuration and the
input (:mod:`capaudit.io.markers`, by the task itself: only it knows when its output is
whole), the parts merged in shard order. Each command hands its *step* (:mod:`.step`) to
:func:`.run.run_step`, which holds the executor, the work folder and the failure rule.
"""
