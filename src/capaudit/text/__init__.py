"""Text analysis shared by metrics and filters: tokens, singulars, object mentions, gender words.

The entry point is :func:`capaudit.text.records.build_records`, which turns a
list of captions into columnar per-caption records computed once.
"""

from capaudit.text.tokenize import tokenize, tokenize_sentences

__all__ = ["tokenize", "tokenize_sentences"]
