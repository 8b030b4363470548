"""A HyperLogLog sketch of distinct tokens: the vocabulary once it no longer fits in memory.

Why: the exact vocabulary keeps every distinct token (a web-scale set has
10^8 of them: URLs, ids, typos). Past ``VOCAB_EXACT_MAX`` distinct tokens the
``vocab`` state turns into this sketch: 2^14 one-byte registers (16 KB), a
relative standard error of 1.04 / sqrt(2^14) = 0.81%. Registers merge by
maximum, so the sketch of a set is the same whatever the sharding or the
moment a shard switched; the token hash is blake2b (stable across processes,
unlike Python's ``hash``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from capaudit.metrics.state_types import register_state

__all__ = ["HyperLogLog", "HLL_P", "HLL_REL_ERROR"]

HLL_P = 14
HLL_M = 1 << HLL_P
HLL_REL_ERROR = 1.04 / np.sqrt(HLL_M)   # relative standard error of the estimate
_LOW = (1 << (64 - HLL_P)) - 1           # the 50 bits whose leading zeros are counted


def token_hashes(tokens: Iterable[str]) -> np.ndarray:
    return np.fromiter((int.from_bytes(hashlib.blake2b(t.encode("utf-8", "surrogatepass"),
                                                       digest_size=8).digest(), "little")
                        for t in tokens), np.uint64)


@register_state
@dataclass
class HyperLogLog:
    registers: np.ndarray = field(default_factory=lambda: np.zeros(HLL_M, np.uint8))

    def add(self, tokens: Iterable[str]) -> "HyperLogLog":
        h = token_hashes(tokens)
        if len(h):
            idx = (h >> np.uint64(64 - HLL_P)).astype(np.int64)
            low = (h & np.uint64(_LOW)).astype(np.float64)       # < 2**50: exact in float64
            bits = np.where(low > 0, np.frexp(low)[1], 0)         # bit length
            rank = (64 - HLL_P + 1 - bits).astype(np.uint8)       # leading zeros + 1
            np.maximum.at(self.registers, idx, rank)
        return self

    def merge(self, other: "HyperLogLog") -> "HyperLogLog":
        np.maximum(self.registers, other.registers, out=self.registers)
        return self

    def estimate(self) -> float:
        m = float(HLL_M)
        alpha = 0.7213 / (1 + 1.079 / m)
        raw = alpha * m * m / np.sum(np.ldexp(1.0, -self.registers.astype(np.int64)))
        zeros = int((self.registers == 0).sum())
        if raw <= 2.5 * m and zeros:
            return m * np.log(m / zeros)                          # linear counting
        return float(raw)
