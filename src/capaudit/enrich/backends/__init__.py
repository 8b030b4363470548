"""LLM/VLM backends; see :mod:`capaudit.enrich.backends.base` for the contract."""

from capaudit.enrich.backends.base import BACKENDS, Backend, GenRequest, GenResult, make_backend

__all__ = ["BACKENDS", "Backend", "GenRequest", "GenResult", "make_backend"]
