"""Input and output: caption readers, annotations, shards, exports."""
