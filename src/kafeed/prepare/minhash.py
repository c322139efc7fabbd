"""MinHash signatures over word shingles and LSH band keys, a batch of documents at a time in NumPy.

Words: the lowercased UTF-8 text split on ASCII whitespace. Each word gets a
64-bit polynomial hash, each run of ``shingle`` consecutive words a shingle hash
combining them, and each of ``bands * rows`` permutations ``h_k(s) = (a_k s + b_k) >> 32``
(mod 2^64, fixed seeds so every worker agrees) keeps its minimum over the document's
shingles. Signature rows ``[i * rows, (i + 1) * rows)`` hash to band key ``i``; two
documents with Jaccard similarity ``J`` share at least one band key with probability
``1 - (1 - J^rows)^bands``, which crosses 1/2 near ``(1 / bands)^(1 / rows)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
_P = np.uint64(0x100000001B3)  # FNV-1a prime: odd, so invertible mod 2^64
_Q = np.uint64(0x9E3779B97F4A7C15)
_SPACE = np.zeros(256, dtype=bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True
_CHUNK_SHINGLES = 4096  # shingles per matrix product: small enough to stay in cache


def _mix(x: U64) -> U64:
    """splitmix64's finalizer: spreads structured values over all 64 bits."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def word_hashes(text: str) -> U64:
    """One 64-bit hash per word, from prefix sums of the bytes (no Python loop over words)."""
    data = np.frombuffer(text.lower().encode("utf-8", "surrogatepass"), dtype=np.uint8)
    if not data.size:
        return np.zeros(0, dtype=np.uint64)
    space = _SPACE[data]
    word = ~space
    starts = np.flatnonzero(word & np.concatenate(([True], space[:-1])))
    ends = np.flatnonzero(word & np.concatenate((space[1:], [True]))) + 1
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.full(data.size, _P, dtype=np.uint64))  # P^1 .. P^n
        prefix = np.concatenate(([np.uint64(0)], np.cumsum((data.astype(np.uint64) + 1) * powers)))
        # sum over the word of (byte + 1) * P^(k + 1); times P^-start it no longer depends on
        # where the word is, so equal words hash equal.
        raw = prefix[ends] - prefix[starts]
        inv = _inverse_powers(data.size)
        return _mix(raw * inv[starts] + (ends - starts).astype(np.uint64))


_INV_CACHE: list[U64] = [np.ones(1, dtype=np.uint64)]


def _inverse_powers(n: int) -> U64:
    """P^-k mod 2^64 for k < n (cached, grown on demand)."""
    have = _INV_CACHE[0]
    if have.size < n:
        inv_p = np.uint64(pow(int(_P), -1, 2**64))
        with np.errstate(over="ignore"):
            grown = np.cumprod(np.full(max(n, 2 * have.size), inv_p, dtype=np.uint64))
        _INV_CACHE[0] = np.concatenate(([np.uint64(1)], grown))
    return _INV_CACHE[0]


def shingle_hashes(words: U64, n: int) -> U64:
    """One hash per run of ``n`` words (one for the whole text when it has fewer)."""
    if words.size == 0:
        return np.zeros(1, dtype=np.uint64)
    if words.size < n:
        n = int(words.size)
    count = words.size - n + 1
    out = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            out = out * _Q + words[j:j + count]
    return _mix(out)


class MinHasher:
    """Signatures and band keys for one parameter set (shared by every worker through fixed seeds)."""

    def __init__(self, *, shingle: int = 5, bands: int = 14, rows: int = 8, seed: int = 1) -> None:
        self.shingle, self.bands, self.rows = shingle, bands, rows
        rng = np.random.default_rng(seed)
        perms = bands * rows
        self._a = rng.integers(1, 2**32, perms, dtype=np.uint32) | np.uint32(1)
        self._b = rng.integers(0, 2**32, perms, dtype=np.uint32)
        self._band_salt = _mix(np.arange(1, bands + 1, dtype=np.uint64) * _Q)

    @property
    def threshold(self) -> float:
        """The Jaccard similarity at which a pair is caught half the time."""
        return float((1 / self.bands) ** (1 / self.rows))

    def signatures(self, texts: Sequence[str]) -> npt.NDArray[np.uint32]:
        """``(len(texts), bands * rows)`` minimum hashes."""
        shingles = [(shingle_hashes(word_hashes(t), self.shingle) >> np.uint64(32)).astype(np.uint32)
                    for t in texts]
        out = np.empty((len(texts), self._a.size), dtype=np.uint32)
        start = 0
        while start < len(texts):
            stop, total = start, 0
            while stop < len(texts) and (stop == start or total + shingles[stop].size <= _CHUNK_SHINGLES):
                total += shingles[stop].size
                stop += 1
            hashed = np.multiply.outer(np.concatenate(shingles[start:stop]), self._a)
            hashed += self._b
            hashed ^= hashed >> np.uint32(15)
            bounds = np.cumsum([0] + [s.size for s in shingles[start:stop - 1]])
            out[start:stop] = np.minimum.reduceat(hashed, bounds, axis=0)
            start = stop
        return out

    def band_keys(self, texts: Sequence[str]) -> U64:
        """``(len(texts), bands)`` nonzero keys: documents sharing one are near-duplicate candidates."""
        sig = self.signatures(texts).astype(np.uint64).reshape(len(texts), self.bands, self.rows)
        acc = np.zeros((len(texts), self.bands), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(self.rows):
                acc = acc * _Q + sig[:, :, j]
            keys = _mix(acc ^ self._band_salt[None, :])
        keys[keys == 0] = 1
        return keys


def jaccard(a: str, b: str, shingle: int = 5) -> float:
    """Exact Jaccard similarity of two texts' shingle sets (for tests and tuning)."""
    sa = set(shingle_hashes(word_hashes(a), shingle).tolist())
    sb = set(shingle_hashes(word_hashes(b), shingle).tolist())
    return len(sa & sb) / max(1, len(sa | sb))
