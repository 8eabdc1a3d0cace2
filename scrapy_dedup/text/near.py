"""Near-duplicate methods: how a text becomes a fingerprint, how fingerprints
are indexed and when two of them are near duplicates. No Scrapy import.

A store keeps the fingerprints; a method tells it how to find and compare
them, so the same logic serves the memory, SQLite and Redis stores.

Band keys depend on the method's parameters (MinHash: the band layout its
threshold needs), so a store that keeps band keys files them under the
method's :attr:`~NearMethod.index_name`; SQLite indexes its fingerprints
anew at every start, Redis refuses a run whose index is another one
(:func:`fitting_settings` tells which settings fit).
"""

from __future__ import annotations

import hashlib
from itertools import combinations, pairwise
from typing import Any, Protocol

import numpy as np

from scrapy_dedup.text._hashing import GOLDEN, MASK64, mix64
from scrapy_dedup.text.minhash import DEFAULT_LAYOUT, MinHashLSH, minhash_signature
from scrapy_dedup.text.shingles import shingle_hashes
from scrapy_dedup.text.simhash import hamming, simhash_from_hashes
from scrapy_dedup.text.simhash_index import SimhashIndex

_START = "\ue000 \ue000"  # private-use characters: never words of a real text
_END = "\ue001 \ue001"

__all__ = [
    "INDEX_SUFFIX_GLOB",
    "MinHashMethod",
    "NearIndex",
    "NearMethod",
    "SimhashMethod",
    "doc_id",
    "fitting_settings",
    "make_method",
]


class NearIndex(Protocol):
    def query(self, fingerprint: Any) -> list[tuple[int, Any]]: ...

    def add(self, fingerprint: Any, doc_id: int) -> None: ...


class NearMethod(Protocol):
    """What a store needs to know about a near-duplicate method."""

    #: Names the fingerprints: methods of one name can compare each other's.
    name: str
    #: Names the band keys: methods of one index name give every fingerprint
    #: the same ones. ``name`` itself, or ``name`` and a suffix matching
    #: :data:`INDEX_SUFFIX_GLOB`.
    index_name: str

    def fingerprint(self, text: str) -> Any:
        """The fingerprint of a (normalized or raw) text."""

    def new_index(self) -> NearIndex:
        """An empty in-memory index; ``query`` returns matches only, best first,
        as ``(doc_id, score)``."""

    def describe(self, score: Any) -> str:
        """The score in words, for logs."""

    def encode(self, fingerprint: Any) -> bytes:
        """The fingerprint as bytes a store can keep (never pickled)."""

    def decode(self, data: bytes) -> Any:
        """The fingerprint :meth:`encode` turned into ``data``."""

    def band_keys(self, fingerprint: Any) -> list[int]:
        """64-bit keys such that every near duplicate shares at least one
        (stores without an in-memory index look candidates up by them)."""

    def match(self, fingerprint: Any, other: Any) -> tuple[float, Any] | None:
        """``(closeness, score)`` when ``other`` is a near duplicate of
        ``fingerprint`` (higher closeness is nearer), else ``None``."""


#: A glob matching the suffix of every index name but the plain method name
#: (a store deletes what it filed under any of them by this pattern).
INDEX_SUFFIX_GLOB = "-[0-9][0-9][0-9]x[0-9][0-9][0-9]"


def _mix64(value: int, salt: int) -> int:
    """Spreads a key's bits (stores shard by one byte of it)."""
    return mix64((value + (salt + 1) * GOLDEN) & MASK64)


def doc_id(data: bytes) -> bytes:
    """A kept document's 8-byte id in stores that need one: a hash of its
    encoded fingerprint."""
    return hashlib.blake2b(data, digest_size=8).digest()


class MinHashMethod:
    """Estimated 3-word-shingle Jaccard similarity at or above ``threshold``,
    candidates found through MinHash LSH bands (the default), as many and as
    long as the threshold needs (:func:`~scrapy_dedup.text.minhash.lsh_layout`).

    Two marker words pad each end of the text, so a changed first or last word
    weighs as much as one in the middle (3 shingles, not 1).
    """

    name = "minhash"

    def __init__(self, threshold: float = 0.75, num_perm: int = 128) -> None:
        self._lsh = MinHashLSH(num_perm, threshold=threshold)  # validates the parameters
        self.threshold = threshold
        self.num_perm = num_perm
        self.bands, self.rows = self._lsh.bands, self._lsh.rows
        # The default layout keeps the plain name: stores written before the
        # layout followed the threshold filed their band keys under it.
        self.index_name = (
            self.name
            if (self.bands, self.rows) == DEFAULT_LAYOUT
            else f"{self.name}-{self.bands:03d}x{self.rows:03d}"
        )

    def fingerprint(self, text: str) -> np.ndarray:
        return minhash_signature(shingle_hashes(f"{_START} {text} {_END}"), self.num_perm)

    def new_index(self) -> MinHashLSH:
        return MinHashLSH(self.num_perm, threshold=self.threshold)

    def describe(self, score: Any) -> str:
        return f"estimated Jaccard similarity {score:.2f}"

    def encode(self, fingerprint: np.ndarray) -> bytes:
        return np.asarray(fingerprint, dtype="<u4").tobytes()

    def decode(self, data: bytes) -> np.ndarray:
        if len(data) != 4 * self.num_perm:
            raise ValueError(f"a {self.num_perm}-value MinHash is {4 * self.num_perm} bytes")
        return np.frombuffer(data, dtype="<u4").astype(np.uint32)

    def band_keys(self, fingerprint: np.ndarray) -> list[int]:
        return self._lsh.band_keys(fingerprint)

    def match(self, fingerprint: np.ndarray, other: np.ndarray) -> tuple[float, Any] | None:
        score = float(np.count_nonzero(fingerprint == other)) / self.num_perm
        return (score, score) if score >= self.threshold else None


class SimhashMethod:
    """Hamming distance of 64-bit SimHashes at most ``max_distance`` (the
    recipe's method; 3 makes it a near-exact detector), through the exact
    Manku-Jain-Das Sarma permutation index."""

    name = "simhash"

    def __init__(self, max_distance: int = 3) -> None:
        SimhashIndex(max_distance)  # validates the radius
        self.max_distance = max_distance
        count = max_distance + 2
        # Keys are pairs of blocks (see band_keys): another radius, other keys.
        self.index_name = self.name if max_distance == 3 else f"{self.name}-{count:03d}x002"
        edges = [64 * i // count for i in range(count + 1)]
        self._blocks = [((1 << (hi - lo)) - 1) << lo for lo, hi in pairwise(edges)]

    def fingerprint(self, text: str) -> int:
        return simhash_from_hashes(shingle_hashes(text))

    def new_index(self) -> SimhashIndex:
        return SimhashIndex(self.max_distance)

    def describe(self, score: Any) -> str:
        return f"SimHash distance {score} bits"

    @staticmethod
    def distance(a: int, b: int) -> int:
        return hamming(a, b)

    def encode(self, fingerprint: int) -> bytes:
        return int(fingerprint).to_bytes(8, "little")

    def decode(self, data: bytes) -> int:
        if len(data) != 8:
            raise ValueError("a SimHash is 8 bytes")
        return int.from_bytes(data, "little")

    def band_keys(self, fingerprint: int) -> list[int]:
        # Pigeonhole: cut the 64 bits into k + 2 blocks; a fingerprint within k
        # bits differs in at most k of them, so it shares at least two blocks
        # exactly, and every pair of blocks is a key.
        keys = []
        for n, (a, b) in enumerate(combinations(self._blocks, 2)):
            keys.append(_mix64((fingerprint & a) | (fingerprint & b), n))
        return keys

    def match(self, fingerprint: int, other: int) -> tuple[float, Any] | None:
        distance = hamming(fingerprint, other)
        return (-distance, distance) if distance <= self.max_distance else None


def make_method(name: str, *, threshold: float, max_distance: int) -> NearMethod | None:
    """The method called ``name`` ("minhash", "simhash" or "off")."""
    if name == "minhash":
        return MinHashMethod(threshold=threshold)
    if name == "simhash":
        return SimhashMethod(max_distance=max_distance)
    if name == "off":
        return None
    raise ValueError(f"unknown near-duplicate method {name!r}: use 'minhash', 'simhash' or 'off'")


def fitting_settings(index_name: str) -> str:
    """Which settings file texts in the index named ``index_name``, in words
    (for a message asking a user to run with them)."""
    method = index_name.partition("-")[0]
    if method == "minhash":
        fits = [t / 100 for t in range(50, 101) if MinHashMethod(t / 100).index_name == index_name]
        if len(fits) == 1:
            return f"DEDUP_NEAR_THRESHOLD={fits[0]:.2f}"
        if fits:
            return f"DEDUP_NEAR_THRESHOLD from {fits[0]:.2f} to {fits[-1]:.2f}"
    elif method == "simhash":
        radii = [str(d) for d in range(9) if SimhashMethod(d).index_name == index_name]
        if radii:
            return f"DEDUP_NEAR_METHOD='simhash' with DEDUP_SIMHASH_MAX_DISTANCE={radii[0]}"
    return f"other settings (index {index_name!r})"
