"""Enrichment adapters: how one sample becomes prompts and an enriched caption."""

from capaudit.enrich.adapters.base import ADAPTERS, Adapter, Context

__all__ = ["ADAPTERS", "Adapter", "Context"]
