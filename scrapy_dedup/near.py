"""Near-duplicate methods: how a text becomes a fingerprint, how fingerprints
are indexed and when two of them are near duplicates. No Scrapy import.

A store keeps the fingerprints; a method tells it how to find and compare
them, so the same logic serves the memory, SQLite and Redis stores.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from scrapy_dedup.fingerprint import hamming, shingle_hashes, simhash_from_hashes
from scrapy_dedup.index import SimhashIndex
from scrapy_dedup.minhash import MinHashLSH, minhash_signature

_START = "\ue000 \ue000"  # private-use characters: never words of a real text
_END = "\ue001 \ue001"

__all__ = ["MinHashMethod", "NearIndex", "NearMethod", "SimhashMethod", "make_method"]


class NearIndex(Protocol):
    def query(self, fingerprint: Any) -> list[tuple[int, Any]]: ...

    def add(self, fingerprint: Any, doc_id: int) -> None: ...


class NearMethod(Protocol):
    """What a store needs to know about a near-duplicate method."""

    name: str

    def fingerprint(self, text: str) -> Any:
        """The fingerprint of a (normalized or raw) text."""

    def new_index(self) -> NearIndex:
        """An empty in-memory index; ``query`` returns matches only, best first,
        as ``(doc_id, score)``."""

    def describe(self, score: Any) -> str:
        """The score in words, for logs."""


class MinHashMethod:
    """Estimated 3-word-shingle Jaccard similarity at or above ``threshold``,
    candidates found through MinHash LSH bands (the default).

    Two marker words pad each end of the text, so a changed first or last word
    weighs as much as one in the middle (3 shingles, not 1).
    """

    name = "minhash"

    def __init__(self, threshold: float = 0.75, num_perm: int = 128) -> None:
        MinHashLSH(num_perm, threshold=threshold)  # validates the parameters
        self.threshold = threshold
        self.num_perm = num_perm

    def fingerprint(self, text: str) -> np.ndarray:
        return minhash_signature(shingle_hashes(f"{_START} {text} {_END}"), self.num_perm)

    def new_index(self) -> MinHashLSH:
        return MinHashLSH(self.num_perm, threshold=self.threshold)

    def describe(self, score: Any) -> str:
        return f"estimated Jaccard similarity {score:.2f}"


class SimhashMethod:
    """Hamming distance of 64-bit SimHashes at most ``max_distance`` (the
    recipe's method; 3 makes it a near-exact detector), through the exact
    Manku-Jain-Das Sarma permutation index."""

    name = "simhash"

    def __init__(self, max_distance: int = 3) -> None:
        SimhashIndex(max_distance)  # validates the radius
        self.max_distance = max_distance

    def fingerprint(self, text: str) -> int:
        return simhash_from_hashes(shingle_hashes(text))

    def new_index(self) -> SimhashIndex:
        return SimhashIndex(self.max_distance)

    def describe(self, score: Any) -> str:
        return f"SimHash distance {score} bits"

    @staticmethod
    def distance(a: int, b: int) -> int:
        return hamming(a, b)


def make_method(name: str, *, threshold: float, max_distance: int) -> NearMethod | None:
    """The method called ``name`` ("minhash", "simhash" or "off")."""
    if name == "minhash":
        return MinHashMethod(threshold=threshold)
    if name == "simhash":
        return SimhashMethod(max_distance=max_distance)
    if name == "off":
        return None
    raise ValueError(f"unknown near-duplicate method {name!r}: use 'minhash', 'simhash' or 'off'")
