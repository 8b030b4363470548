"""``filter run --shards``: the hallucination filter over a corpus's shards, streaming,
resumable, on local processes or Ray (:mod:`.run`)."""
