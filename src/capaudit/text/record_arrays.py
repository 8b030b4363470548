"""The columnar records of analysed captions: flat arrays, concatenated chunk by chunk.

Why apart from :mod:`capaudit.text.records`: that module analyses captions (the hot
loop) and farms chunks out to worker processes; this one is the container they
fill and every metric reads (:class:`CaptionRecords`), with the mention it unpacks
to and the posting-list cap the two share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from capaudit.text.objects import get_lexicon

__all__ = ["NotKept", "NOT_KEPT", "CaptionRecords", "Mention", "POSTING_CAP"]

POSTING_CAP = 64            # rare-token posting lists are kept up to this many captions


@dataclass(frozen=True)
class Mention:
    word: str
    category: str
    token: int
    sentence: int


class NotKept:
    """The token table of records built without it (``build_records(..., vocabulary=False)``,
    when no asked metric reads it): reading it stops with a line saying how to ask for it,
    never an empty vocabulary a metric would count as zero words."""

    def _refuse(self, *args, **kwargs):
        raise RuntimeError("these caption records were built without their token table: a "
                           "metric that reads token_counts or postings sets vocabulary = True "
                           "in its spec (build_records(..., vocabulary=True))")

    __iter__ = __len__ = __getitem__ = __contains__ = __bool__ = _refuse

    def __getattr__(self, name: str):
        if name.startswith("__"):  # pickle and copy look for optional hooks
            raise AttributeError(name)
        self._refuse()


NOT_KEPT = NotKept()


@dataclass
class CaptionRecords:
    """Columnar analysis of ``n`` captions (see module docstring)."""

    mode: str
    n_tokens: np.ndarray          # int32 [n]
    n_sentences: np.ndarray       # int32 [n]
    gender: np.ndarray            # int8 [n], 0 neutral / 1 male / 2 female
    m_offsets: np.ndarray         # int64 [n + 1]
    m_word: np.ndarray            # int16 [m] word id in the lexicon
    m_cat: np.ndarray             # int16 [m] category index
    m_tok: np.ndarray             # int32 [m] token index in the caption
    m_sent: np.ndarray            # int32 [m] sentence index
    token_counts: dict[str, int] = field(default_factory=dict)   # token -> captions using it
    postings: dict[str, list[int]] = field(default_factory=dict)  # token -> first captions

    def __len__(self) -> int:
        return len(self.n_tokens)

    @property
    def vocab(self) -> set[str]:
        return set(self.token_counts)

    @property
    def categories(self) -> list[str]:
        return get_lexicon(self.mode).categories

    def mentions(self, i: int) -> list[Mention]:
        lex = get_lexicon(self.mode)
        a, b = self.m_offsets[i], self.m_offsets[i + 1]
        return [Mention(lex.words[w], lex.categories[c], int(t), int(s)) for w, c, t, s in
                zip(self.m_word[a:b], self.m_cat[a:b], self.m_tok[a:b], self.m_sent[a:b])]

    def mention_caption(self) -> np.ndarray:
        """Caption index of every mention (int64 [m])."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.m_offsets))

    @classmethod
    def concat(cls, parts: Sequence["CaptionRecords"], mode: str) -> "CaptionRecords":
        if not parts:
            return _empty(mode)
        offs, base, start = [np.zeros(1, np.int64)], 0, 0
        counts: dict[str, int] = {}
        posts: dict[str, list[int]] = {}
        kept = not any(isinstance(p.token_counts, NotKept) for p in parts)
        for p in parts:
            offs.append(p.m_offsets[1:] + base)
            base += int(p.m_offsets[-1])
            if not kept:
                continue
            for t, c in p.token_counts.items():
                counts[t] = counts.get(t, 0) + c
            for t, lst in p.postings.items():
                cur = posts.setdefault(t, [])
                if len(cur) < POSTING_CAP:
                    cur.extend(x + start for x in lst[:POSTING_CAP - len(cur)])
            start += len(p)
        posts = {t: lst for t, lst in posts.items() if counts[t] <= POSTING_CAP}
        if not kept:
            counts = posts = NOT_KEPT
        cat = np.concatenate
        return cls(mode, cat([p.n_tokens for p in parts]), cat([p.n_sentences for p in parts]),
                   cat([p.gender for p in parts]), cat(offs), cat([p.m_word for p in parts]),
                   cat([p.m_cat for p in parts]), cat([p.m_tok for p in parts]),
                   cat([p.m_sent for p in parts]), counts, posts)


def _empty(mode: str) -> CaptionRecords:
    z = np.zeros(0, np.int32)
    return CaptionRecords(mode, z, z, z.astype(np.int8), np.zeros(1, np.int64), z.astype(np.int16),
                          z.astype(np.int16), z, z)
