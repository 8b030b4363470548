"""Generative caption enrichment (ShareGPT4V-, FuseCap-, CapsFusion-style) over shards."""
