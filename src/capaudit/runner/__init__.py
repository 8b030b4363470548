"""The one runner of sharded work: plan -> tasks -> run -> mark -> merge.

Why one: ``audit run --shards``, ``filter run --shards``, ``enrich`` and ``annotations
detect`` are the same job (a pure function per shard, run on local processes or Ray, each
shard's output written whole and then marked done, keyed by the configuration and the
input, the parts merged in shard order); each of them is a *step* handed to
:func:`capaudit.runner.run.run_step` (:mod:`.step`: what a step declares). The runner holds
the executor (:mod:`capaudit.executors`), the work folder (one run at a time,
:mod:`capaudit.core.storage.work_folder`) and the failure rule (a failed shard stops the run
with one line unless ``skip_bad``); the step holds its plan, its task functions and its merge.
Markers are written by the task functions themselves (:mod:`capaudit.io.markers`), since
only the task knows when its output is whole.
"""
