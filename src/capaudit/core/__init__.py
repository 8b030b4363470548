"""Shared machinery: registries, configuration, run provenance."""
