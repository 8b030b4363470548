"""LLM/VLM backends (OpenAI-compatible servers, local transformers models, the response
cache): used by enrichment, the critique filter and the judged metrics. The contract is in
:mod:`capaudit.llm.base`."""

from capaudit.llm.base import BACKENDS, Backend, GenRequest, GenResult, make_backend

__all__ = ["BACKENDS", "Backend", "GenRequest", "GenResult", "make_backend"]
