"""LIC leakage (Hirota et al., CVPR 2022): how much masked captions reveal gender or skin tone.

Public API (torch is imported only by the classifiers, lazily):

- :func:`~capaudit.audit.lic.masking.mask_caption`, ``tokenize``, ``mask_tokens``;
- :func:`~capaudit.audit.lic.split.balanced_split`;
- :func:`~capaudit.audit.lic.runner.run_lic` and the ``CLASSIFIERS`` registry
  (``lstm``: reference-faithful BiLSTM; ``transformer``: local encoder, default
  packaged MiniLM-L6 whose numbers are not comparable with the reference's BERT).
"""

from capaudit.audit.lic.masking import (ATTRIBUTES, GENDER_WORDS, RACE_WORDS, mask_caption,
                                        mask_tokens, tokenize)
from capaudit.audit.lic.runner import CLASSIFIERS, DEFAULT_SEEDS, fingerprint, run_lic, summarize
from capaudit.audit.lic.split import Split, balanced_split

__all__ = ["ATTRIBUTES", "GENDER_WORDS", "RACE_WORDS", "mask_caption", "mask_tokens", "tokenize",
           "CLASSIFIERS", "DEFAULT_SEEDS", "fingerprint", "run_lic", "summarize", "Split",
           "balanced_split"]
