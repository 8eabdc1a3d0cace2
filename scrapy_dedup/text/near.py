"""Near-duplicate methods: how a text becomes a fingerprint, how fingerprints
are indexed and when two of them are near duplicates. No Scrapy import.

A store keeps the fingerprints; a method tells it how to find and compare
them, so the same logic serves the memory, SQLite and Redis stores.

Band keys depend on the method's parameters (MinHash: the band layout its
threshold needs), so a store that keeps band keys files them under the
method's :attr:`~NearMethod.index_name`; SQLite indexes its fingerprints
for the layout a run needs (and saves that index per layout), Redis refuses
a run whose index is another one (:func:`fitting_settings` tells which
settings fit).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import combinations, pairwise
from typing import Any, Protocol

import numpy as np

from scrapy_dedup.text._hashing import GOLDEN, MASK64, mix64
from scrapy_dedup.text.minhash import (
    NUM_VALUES,
    SKETCH_BYTES,
    MinHashLSH,
    Signature,
    best_match,
    jaccard_estimate,
    signature,
)
from scrapy_dedup.text.shingles import NormalizedText, shingle_hashes
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

    def fingerprint_of(self, text: NormalizedText) -> Any:
        """:meth:`fingerprint` of ``text.text``, from the normalization the
        exact digest used too."""

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

    def best_match(
        self, fingerprint: Any, candidates: Sequence[Any]
    ) -> tuple[int, float, Any] | None:
        """``(position, closeness, score)`` of the candidate ``fingerprint``
        is a near duplicate of, deciding over all the ``candidates`` a lookup
        found at once; ``None`` when none is."""


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

    Fingerprints are one-permutation MinHash :class:`~scrapy_dedup.text.minhash.Signature`
    objects: 128 band values of 16 bits and a 128-byte sketch of 512 2-bit
    values that estimates the similarity. :meth:`best_match` is the decision:
    it accounts for how many candidates were compared, so a page of a site
    template is not dropped because one of its many lookalikes looked close.

    Two marker words pad each end of the text, so a changed first or last word
    weighs as much as one in the middle (3 shingles, not 1).
    """

    #: "minhash" was the 128 x 32-bit signature of earlier versions: its
    #: fingerprints are never compared with these.
    name = "minhash2"
    #: Bytes of an encoded fingerprint: 128 uint16 band values, then the sketch.
    encoded_size = 2 * NUM_VALUES + SKETCH_BYTES

    def __init__(self, threshold: float = 0.75, num_perm: int = NUM_VALUES) -> None:
        self._lsh = MinHashLSH(num_perm, threshold=threshold)  # validates the parameters
        self.threshold = threshold
        self.num_perm = num_perm
        self.bands, self.rows = self._lsh.bands, self._lsh.rows
        self.index_name = f"{self.name}-{self.bands:03d}x{self.rows:03d}"

    def fingerprint(self, text: str) -> Signature:
        return signature(self.shingles(text))

    def fingerprint_of(self, text: NormalizedText) -> Signature:
        return signature(self.shingles_of(text))

    def shingles(self, text: str) -> np.ndarray:
        """The hashes a fingerprint of ``text`` is made of (the marker words included)."""
        return shingle_hashes(f"{_START} {text} {_END}")

    def shingles_of(self, text: NormalizedText) -> np.ndarray:
        """:meth:`shingles` of ``text.text``, from its normalization."""
        return text.shingle_hashes(pad=(_START, _END))

    def new_index(self) -> MinHashLSH:
        return MinHashLSH(self.num_perm, threshold=self.threshold)

    def describe(self, score: Any) -> str:
        return f"estimated Jaccard similarity {score:.2f}"

    def encode(self, fingerprint: Signature) -> bytes:
        return fingerprint.values.astype("<u2").tobytes() + fingerprint.sketch.tobytes()

    def decode(self, data: bytes) -> Signature:
        if len(data) != self.encoded_size:
            raise ValueError(f"a {self.name} fingerprint is {self.encoded_size} bytes")
        values = np.frombuffer(data, dtype="<u2", count=NUM_VALUES).astype(np.uint16)
        sketch = np.frombuffer(data, dtype=np.uint8, offset=2 * NUM_VALUES).copy()
        return Signature(values, sketch)

    def decode_many(self, blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """``(values, sketches)`` of many encoded fingerprints at once, for
        :meth:`MinHashLSH.add_many` (a blob of another size raises ``ValueError``)."""
        sizes = set(map(len, blobs))
        if sizes - {self.encoded_size}:
            raise ValueError(f"a {self.name} fingerprint is {self.encoded_size} bytes")
        raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(-1, self.encoded_size)
        values = np.ascontiguousarray(raw[:, : 2 * NUM_VALUES]).view("<u2")
        return values.astype(np.uint16, copy=False), raw[:, 2 * NUM_VALUES :].copy()

    def band_keys(self, fingerprint: Signature) -> list[int]:
        return fingerprint.band_keys(self.bands, self.rows)

    def match(self, fingerprint: Signature, other: Signature) -> tuple[float, Any] | None:
        """One comparison: the estimate, when it reaches the threshold. A
        store comparing several candidates calls :meth:`best_match` instead."""
        score = jaccard_estimate(fingerprint, other)
        return (score, score) if score >= self.threshold else None

    def best_match(
        self, fingerprint: Signature, candidates: Sequence[Signature]
    ) -> tuple[int, float, Any] | None:
        """``(position, closeness, score)`` of the candidate ``fingerprint``
        is a near duplicate of, among all the ``candidates`` a lookup found
        (each at most once); ``None`` when none is. The bar rises with the
        number of candidates near the threshold
        (:func:`~scrapy_dedup.text.minhash.match_bar`)."""
        if not candidates:
            return None
        found = best_match(
            fingerprint.sketch,
            np.stack([c.sketch for c in candidates]),
            self.threshold,
            fingerprint.template,
        )
        return None if found is None else (found[0], found[1], found[1])


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

    def fingerprint_of(self, text: NormalizedText) -> int:
        return simhash_from_hashes(text.shingle_hashes())

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

    def best_match(
        self, fingerprint: int, candidates: Sequence[int]
    ) -> tuple[int, float, Any] | None:
        # The index is exact (every pair within the radius is found): no bar to raise.
        best: tuple[int, float, Any] | None = None
        for position, other in enumerate(candidates):
            found = self.match(fingerprint, other)
            if found is not None and (best is None or found[0] > best[1]):
                best = (position, found[0], found[1])
        return best


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
        return (
            f"an earlier scrapy-dedup version's MinHash (index {index_name!r}), "
            "whose fingerprints this version cannot compare"
        )
    if method == MinHashMethod.name:
        fits = [
            t / 1000 for t in range(500, 1001) if MinHashMethod(t / 1000).index_name == index_name
        ]
        if len(fits) == 1:
            return f"DEDUP_NEAR_THRESHOLD={fits[0]:.3f}"
        if fits:
            return f"DEDUP_NEAR_THRESHOLD from {fits[0]:.3f} to {fits[-1]:.3f}"
    elif method == "simhash":
        radii = [str(d) for d in range(9) if SimhashMethod(d).index_name == index_name]
        if radii:
            return f"DEDUP_NEAR_METHOD='simhash' with DEDUP_SIMHASH_MAX_DISTANCE={radii[0]}"
    return f"other settings (index {index_name!r})"
