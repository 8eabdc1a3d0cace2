"""MinHash signatures and an LSH band index over word shingles. No Scrapy import.

Near-duplicate recall needs a candidate search that keeps up with a few
percent of edited words. A 64-bit SimHash of such a pair differs in about 7
bits (often 10 or more), and a radius that wide cannot be indexed exactly at
crawl scale. MinHash bands can: unrelated documents share almost no
shingles, so they almost never meet in a band, while a pair with a 3-shingle
Jaccard similarity of 0.89 (2% of the words changed) meets in at least one
of 16 bands of 4 rows with probability 1 - (1 - 0.89**4)**16 > 0.9999. The
signature, 128 values long, also estimates that Jaccard similarity to within
about 0.04, which is what confirms a candidate.

The bands follow the threshold (:func:`lsh_layout`): 16 bands of 4 rows
bring together 99% of the pairs at any threshold above 0.707; a lower one
needs more bands, or shorter ones.

>>> from scrapy_dedup.text.shingles import shingle_hashes
>>> a = minhash_signature(shingle_hashes("the quick brown fox jumps over the lazy dog"))
>>> b = minhash_signature(shingle_hashes("the quick brown fox jumps over the lazy cat"))
>>> round(jaccard_estimate(a, a), 2), 0.5 < jaccard_estimate(a, b) < 1.0
(1.0, True)
"""

from __future__ import annotations

import math

import numpy as np

from scrapy_dedup.text._hashing import GOLDEN, splitmix64

__all__ = [
    "DEFAULT_LAYOUT",
    "MIN_THRESHOLD",
    "TARGET_RECALL",
    "MinHashLSH",
    "band_probability",
    "jaccard_estimate",
    "lsh_layout",
    "minhash_signature",
]

_CHUNK = 4096  # shingles hashed at once: bounds memory for huge texts


def _permutations(num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    # Fixed: signatures must compare across processes, machines and versions.
    values = splitmix64(0x5C4A_9D3D_0ED0_0001, 2 * num_perm)
    a = np.array([v | 1 for v in values[:num_perm]], dtype=np.uint64)  # odd multipliers
    b = np.array(values[num_perm:], dtype=np.uint64)
    return a[:, None], b[:, None]


_PERMS: dict[int, tuple[np.ndarray, np.ndarray]] = {}
_BUFFERS: dict[int, np.ndarray] = {}  # reused: fresh 2 MB arrays cost page faults


def minhash_signature(hashes: np.ndarray, num_perm: int = 128) -> np.ndarray:
    """The MinHash signature (``num_perm`` uint32 values) of a set of 64-bit
    shingle hashes, with multiply-shift permutations ``(a*h + b) >> 32``.

    Repeated hashes do not matter; an empty set gives all-ones, which
    matches nothing but another empty set.
    """
    perms = _PERMS.get(num_perm)
    if perms is None:
        perms = _PERMS[num_perm] = _permutations(num_perm)
    a, b = perms
    buffer = _BUFFERS.get(num_perm)
    if buffer is None:
        buffer = _BUFFERS[num_perm] = np.empty(num_perm * _CHUNK, dtype=np.uint64)
    mins = np.full(num_perm, np.iinfo(np.uint64).max, dtype=np.uint64)
    hashes = np.asarray(hashes, dtype=np.uint64)  # repeats do not change a minimum
    for start in range(0, len(hashes), _CHUNK):
        chunk = hashes[None, start : start + _CHUNK]
        buf = buffer[: num_perm * chunk.shape[1]].reshape(num_perm, chunk.shape[1])
        np.multiply(a, chunk, out=buf)  # wraps modulo 2**64, as intended
        np.add(buf, b, out=buf)
        np.minimum(mins, buf.min(axis=1), out=mins)
    # The minimum commutes with the shift, so shift once, after it.
    signature: np.ndarray = (mins >> np.uint64(32)).astype(np.uint32)
    return signature


def jaccard_estimate(a: np.ndarray, b: np.ndarray) -> float:
    """The share of equal signature positions: an unbiased estimate of the
    Jaccard similarity of the two shingle sets (standard error
    ``sqrt(J(1-J)/num_perm)``)."""
    return float(np.count_nonzero(a == b)) / len(a)


#: The bands and rows of the default threshold (0.75), and of every store
#: written before the layout followed the threshold.
DEFAULT_LAYOUT = (16, 4)
#: The share of the pairs at exactly the threshold that a layout brings
#: together in at least one band (the estimate then confirms about half of
#: them: it is as likely to fall under the threshold as over it).
TARGET_RECALL = 0.99
#: The lowest threshold the index serves at crawl scale. Below about 0.47 no
#: layout of 3 or more rows reaches TARGET_RECALL within 128 values, and
#: bands of 2 rows meet a fifth to a third of the pages that merely share a
#: site template (3-shingle Jaccard about 0.1): a comparison each, per page.
MIN_THRESHOLD = 0.5


def band_probability(similarity: float, bands: int, rows: int) -> float:
    """The chance that two documents whose shingle sets have Jaccard
    similarity ``similarity`` share at least one of ``bands`` bands of
    ``rows`` rows: ``1 - (1 - similarity**rows)**bands``.

    >>> round(band_probability(0.75, 16, 4), 4), round(band_probability(0.5, 16, 4), 4)
    (0.9977, 0.6439)
    """
    return 1.0 - (1.0 - similarity**rows) ** bands


def lsh_layout(
    threshold: float, num_perm: int = 128, target: float = TARGET_RECALL
) -> tuple[int, int]:
    """``(bands, rows)`` of the LSH index for ``threshold``.

    16 bands of 4 rows (:data:`DEFAULT_LAYOUT`) while they bring together at
    least ``target`` of the pairs at the threshold, as they do above 0.707;
    below, the most rows (up to the default's 4) that still do within
    ``num_perm`` values, with the fewest bands for them. Each row fewer
    multiplies the chance that two unrelated texts meet (a wasted comparison)
    by about 1/J for their small Jaccard J; each band more costs a band key
    per kept text. When no layout reaches ``target``, the one likeliest to
    meet a pair: ``num_perm`` bands of 1 row.

    >>> lsh_layout(0.75), lsh_layout(0.65), lsh_layout(0.6), lsh_layout(0.5)
    ((16, 4), (24, 4), (19, 3), (35, 3))
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    bands, rows = DEFAULT_LAYOUT
    if bands * rows <= num_perm and band_probability(threshold, bands, rows) >= target:
        return DEFAULT_LAYOUT
    for rows in range(min(DEFAULT_LAYOUT[1], num_perm), 0, -1):
        meet = threshold**rows  # the chance one band is equal
        if meet <= 0.0:
            continue
        needed = math.log1p(-target) / math.log1p(-meet)
        if needed > num_perm // rows:
            continue
        bands = max(1, math.ceil(needed))
        if band_probability(threshold, bands, rows) < target:  # rounded down
            bands += 1
        if bands * rows <= num_perm:
            return bands, rows
    return num_perm, 1


class MinHashLSH:
    """Signatures of kept documents, found again through LSH bands.

    The first ``bands * rows`` values of a signature form the bands (by
    default, the :func:`lsh_layout` of ``threshold``); the whole signature
    estimates the similarity. ``query`` returns the stored documents whose
    estimated Jaccard similarity to the signature is at least ``threshold``,
    best first; ``band_keys`` gives the 64-bit keys a store files a signature
    under.
    """

    def __init__(
        self,
        num_perm: int = 128,
        bands: int | None = None,
        rows: int | None = None,
        threshold: float = 0.75,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if bands is None and rows is None:
            bands, rows = lsh_layout(threshold, num_perm)
        elif bands is None or rows is None:
            raise ValueError("give both bands and rows, or neither")
        if bands < 1 or rows < 1 or bands * rows > num_perm:
            raise ValueError(
                f"bands * rows ({bands} * {rows}) must be between 1 and num_perm ({num_perm})"
            )
        self.num_perm = num_perm
        self.bands = bands
        self.rows = rows
        self.threshold = threshold
        self._tables: dict[int, list[int]] = {}
        self._signatures = np.empty((1024, num_perm), dtype=np.uint32)
        self._ids: list[int] = []
        # Mixing multipliers make the band key of band i differ from band j's.
        self._mix = np.arange(1, bands + 1, dtype=np.uint64) * np.uint64(GOLDEN)

    def __len__(self) -> int:
        return len(self._ids)

    def band_keys(self, signature: np.ndarray) -> list[int]:
        """One 64-bit key per band: equal keys mean equal band rows (up to
        hash collisions, which only cost a wasted comparison)."""
        rows = signature[: self.bands * self.rows].reshape(self.bands, self.rows)
        rows = rows.astype(np.uint64)
        key = self._mix.copy()
        golden = np.uint64(GOLDEN)
        for r in range(self.rows):
            key ^= rows[:, r] + golden + (key << np.uint64(6)) + (key >> np.uint64(2))
        return [int(k) for k in key]

    def query(self, signature: np.ndarray) -> list[tuple[int, float]]:
        """``(doc_id, estimated Jaccard)`` of stored documents at or above the threshold."""
        seen: set[int] = set()
        for key in self.band_keys(signature):
            rows = self._tables.get(key)
            if rows:
                seen.update(rows)
        if not seen:
            return []
        rows_idx = np.fromiter(seen, dtype=np.int64, count=len(seen))
        equal = np.count_nonzero(self._signatures[rows_idx] == signature, axis=1) / self.num_perm
        found = [
            (self._ids[int(i)], float(s))
            for i, s in zip(rows_idx, equal, strict=True)
            if s >= self.threshold
        ]
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found

    def add(self, signature: np.ndarray, doc_id: int) -> None:
        row = len(self._ids)
        if row == len(self._signatures):
            grown = np.empty((2 * row, self.num_perm), dtype=np.uint32)
            grown[:row] = self._signatures
            self._signatures = grown
        self._signatures[row] = signature
        self._ids.append(doc_id)
        for key in self.band_keys(signature):
            self._tables.setdefault(key, []).append(row)
