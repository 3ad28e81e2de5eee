"""Counter-based pseudorandom numbers and permutations, vectorised with numpy.

Every random value in a frame is a pure function of (key, frame index), so any batch
``[k, k+n)`` can be built independently and the same seed always gives the same bytes.
``splitmix64`` is the finaliser of the SplitMix64 generator (Steele et al.), a strong
64-bit mixer. :class:`FeistelPermutation` is a keyed bijection of ``[0, n)`` (a 4-round
Feistel network on the next power of four, with cycle-walking), used for RFC 9693
unique port combinations: it never repeats within ``n`` indices and needs O(1) memory,
so 4,000,000 or 400,000,000 flows cost the same to stream in chunks.

Imports: numpy only (workers use this).
"""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / phi: splitmix64's increment
_GOLDEN = GOLDEN
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Mix uint64 values (wrapping arithmetic). Returns a new uint64 array."""
    z = np.asarray(x, dtype=np.uint64)
    if z.ndim == 0:  # numpy warns on scalar overflow only: compute scalars as 1-element arrays
        return splitmix64(z.reshape(1))[0]
    z = z + _GOLDEN  # array arithmetic wraps silently (and skips errstate's cost per call)
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def mix_key(*parts: int) -> int:
    """Derive a 64-bit key from integers (seed, stream index, field id)."""
    k = np.uint64(0x5EED)
    for p in parts:
        k = splitmix64(np.array([int(k) ^ (int(p) & 0xFFFFFFFFFFFFFFFF)], dtype=np.uint64))[0]
    return int(k)


def hash_index(key: int, index: np.ndarray) -> np.ndarray:
    """Uniform 64-bit values for frame indexes under a key."""
    idx = np.asarray(index, dtype=np.uint64)
    if idx.ndim == 0:
        return hash_index(key, idx.reshape(1))[0]
    return splitmix64(idx * _GOLDEN ^ np.uint64(key))


def uniform_int(key: int, index: np.ndarray, lo: int, span: int) -> np.ndarray:
    """Uniform integers in ``[lo, lo+span)`` (RFC 4814 random fields), as uint64.

    Spans up to 2**32 use the multiply-shift reduction (bias < 2**-32); wider spans use
    modulo (bias < span/2**64, negligible for address ranges).
    """
    h = hash_index(key, index)
    if span <= 1:
        return np.full(h.shape, lo, dtype=np.uint64)
    if span <= 1 << 32:
        v = ((h >> _S32) * np.uint64(span)) >> _S32
    elif span >= 1 << 64:  # the whole 64-bit space (a full IPv6 /64): every value is in range
        v = h
    else:
        v = h % np.uint64(span)
    return v + np.uint64(lo)


class FeistelPermutation:
    """A keyed pseudorandom permutation of ``[0, n)``, evaluated in vectorised chunks."""

    ROUNDS = 4

    def __init__(self, n: int, key: int) -> None:
        if n < 1:
            raise ValueError("permutation size must be ≥ 1")
        self.n = int(n)
        bits = max(2, (self.n - 1).bit_length())
        bits += bits & 1  # even, so both halves have the same width
        self.half = bits // 2
        self.mask = np.uint64((1 << self.half) - 1)
        self.keys = [np.uint64(mix_key(key, r)) for r in range(self.ROUNDS)]

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        h = np.uint64(self.half)
        left = x >> h
        right = x & self.mask
        for k in self.keys:
            f = splitmix64(right ^ k) & self.mask
            left, right = right, left ^ f
        return (left << h) | right

    def __call__(self, index: np.ndarray) -> np.ndarray:
        """Permuted values of ``index mod n`` (uint64)."""
        x = np.asarray(index, dtype=np.uint64)
        if self.n >= 1 << 64:  # the full 64-bit domain: no reduction, no cycle-walking
            return self._encrypt(x)
        x = x % np.uint64(self.n)
        if self.n == 1:
            return x
        y = self._encrypt(x)
        bad = y >= np.uint64(self.n)
        while bad.any():  # cycle-walk: stays a bijection on [0, n); expected < 4 rounds
            y[bad] = self._encrypt(y[bad])
            bad = y >= np.uint64(self.n)
        return y
