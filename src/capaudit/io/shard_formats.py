"""Which files are shards, for each sharded command: the one source of the shard suffixes.

Why two sets, named by what reads them: ``audit run --shards`` (:mod:`capaudit.io.
caption_shards`) streams a shard in record batches and never loads it, so it takes only the
layouts read so (webdataset tars, parquet, a Hugging Face ``datasets`` folder's ``.arrow``
streams); ``filter run --shards`` (:mod:`capaudit.io.shard_files`) writes each cleaned shard
back in its own layout, so it takes every caption file format it has a writer for
(:mod:`capaudit.io.rewrite`), JSON, JSONL and CSV/TSV included, but no ``.arrow``.
"""

from __future__ import annotations

__all__ = ["STREAMED_SHARD_SUFFIXES", "REWRITTEN_SHARD_SUFFIXES"]

# audit run --shards: read in record batches (tar member by member, parquet row group by
# row group, Arrow IPC batch by batch)
STREAMED_SHARD_SUFFIXES = (".tar", ".parquet", ".arrow")
# filter run --shards: cleaned and written back in the shard's own layout
REWRITTEN_SHARD_SUFFIXES = (".tar", ".parquet", ".json", ".jsonl", ".ndjson", ".csv", ".tsv")
