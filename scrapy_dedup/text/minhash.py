"""One-permutation MinHash signatures and a compact LSH band index over word
shingles. No Scrapy import.

A signature is made of one sort of the text's shingle hashes
(one-permutation hashing, with Shrivastava's optimal densification for empty
bins). It holds two things:

- ``values``: 128 bins of 16 bits, bits of the least hash in each 128th of
  the hash space. Bands of them (:func:`lsh_layout`) find the
  candidates: a pair with a 3-shingle Jaccard similarity of 0.89 (2% of the
  words changed) meets in at least one of 16 bands of 4 rows with probability
  ``1 - (1 - 0.89**4)**16 > 0.9999``.
- ``sketch``: 512 finer bins of 2 bits each (b-bit MinHash, 128 bytes), which
  estimate the Jaccard similarity with ``J = (p - 1/4) / (3/4)`` for the share
  ``p`` of equal bins: a standard error of about 0.023 at J = 0.75, against
  0.038 for 128 full 32-bit values in four times the bytes.

A lookup compares a text with a bounded number of candidates (at most
:data:`BUCKET_CAP` kept texts per band key), and :func:`best_match` raises the
bar with the number of candidates that came near the threshold, so the best
of many noisy estimates crosses it no more often than a single estimate does:
pages that merely share a site template (Jaccard 0.6-0.7 to each other) are not
dropped, whatever the number of pages.

>>> from scrapy_dedup.text.shingles import shingle_hashes
>>> a = signature(shingle_hashes("the quick brown fox jumps over the lazy dog"))
>>> b = signature(shingle_hashes("the quick brown fox jumps over the lazy cat"))
>>> jaccard_estimate(a, a), 0.2 < jaccard_estimate(a, b) < 1.0
(1.0, True)
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from scrapy_dedup.text._hashing import GOLDEN, mix64_array

__all__ = [
    "BUCKET_CAP",
    "DEFAULT_LAYOUT",
    "MIN_THRESHOLD",
    "NUM_VALUES",
    "SKETCH_BINS",
    "SKETCH_BYTES",
    "TARGET_RECALL",
    "MinHashLSH",
    "Signature",
    "band_probability",
    "best_match",
    "jaccard_estimate",
    "lsh_layout",
    "match_bar",
    "signature",
]

#: Band values of a signature (16 bits each).
NUM_VALUES = 128
#: Bins of the similarity sketch, 2 bits each.
SKETCH_BINS = 512
SKETCH_BYTES = SKETCH_BINS // 4
#: Kept texts filed under one band key at most (the Redis store's 8 slots):
#: texts sharing a site template share some band keys, and a lookup compares
#: at most ``bands * BUCKET_CAP`` candidates.
BUCKET_CAP = 8

_FINE_BITS = 9  # log2(SKETCH_BINS)
_GROUP = SKETCH_BINS // NUM_VALUES  # fine bins per band value
_EMPTY_VALUE = np.iinfo(np.uint64).max
_PROBES = 32  # densification probes per empty bin computed at once


def _probe_table(bins: int, salt: int, start: int = 0) -> npt.NDArray[np.intp]:
    """``_PROBES`` bins to borrow from, per bin (round ``start``): the same
    for every text, so two texts empty in the same bin borrow alike."""
    seq = np.arange(bins * _PROBES, dtype=np.uint64) + np.uint64(salt + start * bins * _PROBES)
    z = mix64_array(seq * np.uint64(GOLDEN))
    table: npt.NDArray[np.intp] = (z % np.uint64(bins)).astype(np.intp).reshape(bins, _PROBES)
    return table


_LATER: dict[tuple[int, int, int], npt.NDArray[np.intp]] = {}
_LATER_KEPT = 8  # rounds kept per table


def _later_probes(bins: int, salt: int, start: int) -> npt.NDArray[np.intp]:
    """:func:`_probe_table` of a later round, kept for the first rounds: a
    text of 60 words fills about one fine bin in nine, so a few of its empty
    bins need a second round, and computing that table (~150 us) was a fifth
    of such a text's ``process_item``. At most 2 x 8 tables of at most 128
    KiB; the rounds after those (texts of a few words) are computed each
    time, with the same values."""
    key = (bins, salt, start)
    table = _LATER.get(key)
    if table is None:
        table = _probe_table(bins, salt, start)
        if start <= _LATER_KEPT:
            table.flags.writeable = False
            _LATER[key] = table
    return table


_FINE_PROBES = _probe_table(SKETCH_BINS, 0x11)
_COARSE_PROBES = _probe_table(NUM_VALUES, 0x22)


def _densify(values: np.ndarray, filled: np.ndarray, probes: np.ndarray, salt: int) -> None:
    """Optimal densification: an empty bin takes the value of the first
    filled bin of its fixed probe sequence."""
    empty = np.flatnonzero(~filled)
    rounds = 0
    while len(empty):
        table = probes if rounds == 0 else _later_probes(len(filled), salt, rounds)
        candidates = table[empty]
        hit = filled[candidates]
        found = hit.any(axis=1)
        first = hit.argmax(axis=1)
        done = empty[found]
        values[done] = values[candidates[found, first[found]]]
        empty = empty[~found]
        rounds += 1


class Signature:
    """A text's signature: 128 band ``values`` (uint16) and the 128-byte
    ``sketch`` (512 values of 2 bits). Band keys are cached per layout."""

    __slots__ = ("_keys", "sketch", "template", "values")

    def __init__(self, values: np.ndarray, sketch: np.ndarray) -> None:
        self.values = values
        self.sketch = sketch
        self._keys: tuple[tuple[int, int], list[int]] | None = None
        #: The text's view of its host's template (a ``TextTemplate`` of
        #: :mod:`~scrapy_dedup.text.template`), if any: a candidate is then a
        #: match only if it also has the text's distinctive part. Never stored.
        self.template: Any = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Signature):
            return NotImplemented
        return bool(
            np.array_equal(self.values, other.values) and np.array_equal(self.sketch, other.sketch)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        head = self.values[:4].tolist()
        return f"<Signature {head}... sketch {self.sketch[:4].tobytes().hex()}...>"

    def band_keys(self, bands: int, rows: int) -> list[int]:
        """One 64-bit key per band of ``rows`` values (computed once per layout)."""
        cached = self._keys
        if cached is not None and cached[0] == (bands, rows):
            return cached[1]
        values = self.values
        if rows == 4 and values.dtype == np.uint16 and values.flags.c_contiguous:
            # The key before mixing is the little-endian uint64 of 4 values.
            key = values[: 4 * bands].view("<u8") + _band_salts(bands)
            keys: list[int] = _mix64_small(key).tolist()
        else:
            keys = band_keys_of(values[None, :], bands, rows)[0].tolist()
        self._keys = ((bands, rows), keys)
        return keys


_SALTS: dict[int, np.ndarray] = {}
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _band_salts(bands: int) -> np.ndarray:
    """What band ``b`` adds to its key before mixing: ``(b + 1) * GOLDEN``."""
    salts = _SALTS.get(bands)
    if salts is None:
        salts = _SALTS[bands] = np.arange(1, bands + 1, dtype=np.uint64) * np.uint64(GOLDEN)
    return salts


def _mix64_small(z: np.ndarray) -> np.ndarray:
    """:func:`mix64_array` in place with fewer temporaries (small arrays)."""
    t = z >> _S30
    z ^= t
    z *= _M1
    np.right_shift(z, _S27, out=t)
    z ^= t
    z *= _M2
    np.right_shift(z, _S31, out=t)
    z ^= t
    return z


def signature(hashes: np.ndarray) -> Signature:
    """The :class:`Signature` of a set of 64-bit shingle hashes (repeats do
    not matter). An empty set gives all-ones, which matches only another
    empty set."""
    h = np.asarray(hashes, dtype=np.uint64)  # already mixed: uniform 64-bit values
    if len(h) == 0:
        return Signature(
            np.full(NUM_VALUES, 0xFFFF, dtype=np.uint16),
            np.full(SKETCH_BYTES, 0xFF, dtype=np.uint8),
        )
    # One permutation: the top bits pick a bin, the least hash of a bin is its value.
    fine = np.full(SKETCH_BINS, _EMPTY_VALUE, dtype=np.uint64)
    np.minimum.at(fine, (h >> np.uint64(64 - _FINE_BITS)).astype(np.intp), h)
    # A band value is the least of a group of fine bins.
    coarse = fine.reshape(NUM_VALUES, _GROUP).min(axis=1)
    filled = fine != _EMPTY_VALUE
    if not filled.all():
        coarse_filled = coarse != _EMPTY_VALUE
        _densify(fine, filled, _FINE_PROBES, 0x11)
        if not coarse_filled.all():
            _densify(coarse, coarse_filled, _COARSE_PROBES, 0x22)
    # Values: bits below the bin bits, independent of the bin.
    values = ((coarse >> np.uint64(24)) & np.uint64(0xFFFF)).astype(np.uint16)
    lanes = (fine & np.uint64(3)).astype(np.uint8).reshape(SKETCH_BYTES, 4)
    sketch = lanes[:, 0] | (lanes[:, 1] << 2) | (lanes[:, 2] << 4) | (lanes[:, 3] << 6)
    return Signature(values, sketch)


def band_keys_of(values: np.ndarray, bands: int, rows: int) -> npt.NDArray[np.uint64]:
    """Band keys of many signatures at once: ``values`` is ``(n, 128)``
    uint16, the answer ``(n, bands)`` uint64. A band's key mixes its values
    packed 16 bits apart (folded every 4 values) plus ``(band + 1) * GOLDEN``."""
    values = np.asarray(values)
    n = len(values)
    if rows <= 4 and n:
        # Packed with no loop over bands: for 4 rows, a view of the values.
        packed = np.ascontiguousarray(values, dtype="<u2").reshape(n, -1)
        if rows == 4:
            key = packed.view("<u8")[:, :bands] + _band_salts(bands)
        else:
            key = np.zeros((n, bands), dtype=np.uint64)
            for r in range(rows):
                column = packed[:, r : bands * rows : rows].astype(np.uint64)
                key |= column << np.uint64(16 * r)
            key += _band_salts(bands)
        return mix64_array(key)
    v = values[:, : bands * rows].astype(np.uint64).reshape(n, bands, rows)
    key = np.zeros((n, bands), dtype=np.uint64)
    for r in range(rows):
        if r and r % 4 == 0:  # more than 64 bits of values: fold
            key = mix64_array(key)
        key ^= v[:, :, r] << np.uint64(16 * (r % 4))
    key += _band_salts(bands)[None, :]
    return mix64_array(key)


# Equal 2-bit lanes in a byte of ``a ^ b``.
_EQUAL_LANES = np.array(
    [sum(((x >> (2 * i)) & 3) == 0 for i in range(4)) for x in range(256)], dtype=np.uint16
)
_CHANCE = 0.25  # two different 2-bit values are equal by chance


def _estimates(sketch: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Estimated Jaccard similarities of ``sketch`` to each row of ``others``."""
    equal = _EQUAL_LANES[others ^ sketch].sum(axis=-1, dtype=np.int64)
    p = equal / SKETCH_BINS
    estimates: np.ndarray = np.maximum((p - _CHANCE) / (1.0 - _CHANCE), 0.0)
    return estimates


def jaccard_estimate(a: Signature, b: Signature) -> float:
    """The estimated Jaccard similarity of the two shingle sets, from the
    sketches (b-bit MinHash with the chance-equality correction)."""
    return float(_estimates(a.sketch, b.sketch))


def estimate_sd(similarity: float) -> float:
    """The standard error of :func:`jaccard_estimate` at ``similarity``."""
    p = similarity + (1.0 - similarity) * _CHANCE
    return math.sqrt(max(p * (1.0 - p), 0.0) / SKETCH_BINS) / (1.0 - _CHANCE)


#: Candidates whose estimate is this many standard errors under the
#: threshold count as having had no chance to cross it.
_NEAR_SDS = 4.0
_Z = [0.0] + [NormalDist().inv_cdf(1.0 - 0.5 / n) for n in range(1, 4097)]


def match_bar(threshold: float, near: int) -> float:
    """The estimate a candidate needs when ``near`` candidates came within
    reach of ``threshold``: the threshold plus ``z(near)`` standard errors,
    ``z(n)`` the point the largest of ``n`` estimates of a pair exactly at the
    threshold exceeds with probability one half (0 for one candidate). So a
    text exactly at the threshold of every candidate is dropped half of the
    time, as with one candidate, and a text below it is not dropped more often
    because it was compared many times.

    >>> match_bar(0.75, 1), round(match_bar(0.75, 8), 3), round(match_bar(0.75, 128), 3)
    (0.75, 0.785, 0.811)
    """
    z = _Z[min(max(near, 1), len(_Z) - 1)]
    return threshold + z * estimate_sd(threshold)


def best_match(
    sketch: np.ndarray, candidates: np.ndarray, threshold: float, template: Any = None
) -> tuple[int, float] | None:
    """``(position, estimate)`` of the candidate sketch (a row of the
    ``(n, 128)`` uint8 ``candidates``) nearest to ``sketch``, when it clears
    :func:`match_bar` for the candidates that came near the threshold; else
    ``None``. The one decision rule of every store. With the text's
    ``template`` (:attr:`Signature.template`), a candidate must also pass its
    ``confirms`` test (have the text's part that is not its host's template)."""
    if len(candidates) == 0:
        return None
    rows = np.asarray(candidates, dtype=np.uint8).reshape(-1, SKETCH_BYTES)
    estimates = _estimates(sketch, rows)
    best = int(estimates.argmax())
    score = float(estimates[best])
    if score < threshold:
        return None
    near = int(np.count_nonzero(estimates >= threshold - _NEAR_SDS * estimate_sd(threshold)))
    if template is not None:
        over = np.flatnonzero(estimates >= threshold)
        confirmed = np.zeros_like(estimates)
        confirmed[over] = np.where(template.confirms(rows[over]), estimates[over], 0.0)
        estimates = confirmed
        best = int(estimates.argmax())
        score = float(estimates[best])
    if score < match_bar(threshold, near) - 1e-12:
        return None
    return best, score


#: The bands and rows of the default threshold (0.75).
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
    threshold: float, num_perm: int = NUM_VALUES, target: float = TARGET_RECALL
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


# -- the band index -----------------------------------------------------------

_SLOT_BITS = 12  # a directory of 4096 slots, picked by the top 12 bits of a band key
_SLOTS = 1 << _SLOT_BITS
_SLOT_SHIFT = 32 - _SLOT_BITS  # from the top 32 bits of a key to its slot
_ROW_MASK = 0xFFFF_FFFF
_LOW_WORD = 0 if sys.byteorder == "little" else 1  # of a uint64 seen as two uint32
_TOP32 = 0xFFFF_FFFF_0000_0000
# Sketches live in blocks of 16,384 rows (2 MiB): growing never copies, and
# numpy asks for transparent huge pages only from 4 MiB on (their first touch
# can stall a call for milliseconds while the kernel compacts memory).
_BLOCK_BITS = 14
_BLOCK = 1 << _BLOCK_BITS
_U64 = np.empty(0, dtype=np.uint64)


class _Shard:
    """Band entries whose keys fall in directory slots ``lo`` to ``hi - 1``:
    a sorted array of ``(top 32 bits of the key) << 32 | row``, a bitmap of
    the keys in it (about 8 bits per entry, so most keys that are not there
    are told apart without a search), and a dict buffer of recent entries
    (top 32 bits of the key -> row, or a tuple of rows)."""

    __slots__ = ("bits", "buffer", "entries", "hi", "limit", "lo", "mask", "view")

    def __init__(self, lo: int, hi: int, entries: np.ndarray, limit: int) -> None:
        self.lo, self.hi = lo, hi
        self.buffer: dict[int, Any] = {}
        self.limit = limit
        self.mask = 0
        self.bits = bytearray()
        self.install(entries)

    def install(self, entries: np.ndarray, added: np.ndarray | None = None) -> None:
        """Hold ``entries``; ``added``: the ones new since the last install,
        whose bits alone are set while the bitmap keeps its size."""
        self.entries = entries
        self.view = entries.data
        size = 8
        while size < 8 * len(entries):
            size <<= 1
        if added is not None and size == self.mask + 1:
            bits = (added >> np.uint64(32)) & np.uint64(self.mask)
            np.bitwise_or.at(
                np.frombuffer(self.bits, dtype=np.uint8),
                (bits >> np.uint64(3)).astype(np.intp),
                np.left_shift(1, (bits & np.uint64(7)).astype(np.uint8)).astype(np.uint8),
            )
            return
        self.mask = size - 1
        seen = np.zeros(size, dtype=bool)
        seen[(entries >> np.uint64(32)) & np.uint64(size - 1)] = True
        self.bits = bytearray(np.packbits(seen, bitorder="little").tobytes())


class MinHashLSH:
    """Sketches of kept texts, found again through LSH band keys, in about
    ``8 * bands + 128`` bytes per text (256 at the default layout).

    Band entries are sorted uint64 arrays of ``(top 32 bits of the key) << 32
    | row``, cut into shards by the top bits of the key, each with a small dict
    buffer merged in once it reaches a 64th of the shard (CompactMap's
    shape): a merge touches one shard of at most about ``_SPLIT`` entries,
    whatever the size of the index, so no call waits for the whole index to be
    rewritten. Two keys are one when their top 32 bits are (a collision only
    costs a wasted comparison). Sketches live in blocks of 16,384 rows. At
    most :data:`BUCKET_CAP` texts are filed under one key: the first ones.

    ``query`` returns the kept text :func:`best_match` picks, as a list of at
    most one ``(doc_id, estimate)``; ``add`` right after a ``query`` of the
    same fingerprint reuses what the query found.
    """

    _MIN_BUFFER = 64
    _BUFFER_SHIFT = 6  # a buffer of a 64th of its shard
    _SPLIT = 16384

    def __init__(
        self,
        num_perm: int = NUM_VALUES,
        bands: int | None = None,
        rows: int | None = None,
        threshold: float = 0.75,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if num_perm != NUM_VALUES:
            raise ValueError(f"signatures have {NUM_VALUES} band values, not {num_perm}")
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
        self._count = 0
        self._blocks: list[np.ndarray] = []
        # Doc ids per block; None while they are the rows (for the whole
        # index, or for one block).
        self._ids: list[np.ndarray | None] | None = None
        self._slots: list[_Shard] = [_Shard(0, _SLOTS, _U64, self._MIN_BUFFER)] * _SLOTS
        self._last: tuple[Signature, list[int]] | None = None  # keys' bucket sizes

    def __len__(self) -> int:
        return self._count

    def band_keys(self, fingerprint: Signature) -> list[int]:
        """One 64-bit key per band: equal keys mean equal band values (up to
        hash collisions, which only cost a wasted comparison)."""
        return fingerprint.band_keys(self.bands, self.rows)

    # -- lookups --

    def _lookup(self, keys: list[int], found: list[int]) -> list[int]:
        """Append to ``found`` the rows filed under each key; the number of
        them per key."""
        slots = self._slots
        sizes = []
        for key in keys:
            top = key >> 32
            shard = slots[top >> _SLOT_SHIFT]
            size = 0
            bit = top & shard.mask
            if shard.bits[bit >> 3] >> (bit & 7) & 1:
                view = shard.view
                i = bisect_left(view, top << 32)
                if i < len(view) and view[i] >> 32 == top:
                    end = len(view)
                    j = i
                    while j < end and view[j] >> 32 == top:
                        found.append(view[j] & _ROW_MASK)
                        j += 1
                    size = j - i
            held = shard.buffer.get(top)
            if held is not None:
                if type(held) is tuple:
                    found.extend(held)
                    size += len(held)
                else:
                    found.append(held)
                    size += 1
            sizes.append(size)
        return sizes

    def _rows(self, key: int) -> list[int]:
        found: list[int] = []
        self._lookup([key], found)
        return found

    def candidates(self, fingerprint: Signature) -> list[int]:
        """Rows of kept texts sharing a band key with ``fingerprint``."""
        found: list[int] = []
        sizes = self._lookup(fingerprint.band_keys(self.bands, self.rows), found)
        self._last = (fingerprint, sizes)
        return list(dict.fromkeys(found)) if found else found

    def sketches(self, rows: Sequence[int]) -> np.ndarray:
        """The ``(len(rows), 128)`` sketches of kept rows."""
        blocks = self._blocks
        if len(blocks) == 1:
            return blocks[0][np.asarray(rows, dtype=np.intp)]
        return np.stack([blocks[r >> _BLOCK_BITS][r & (_BLOCK - 1)] for r in rows])

    def query(self, fingerprint: Signature) -> list[tuple[int, float]]:
        """``[(doc_id, estimate)]`` of the kept text :func:`best_match` picks, or ``[]``."""
        rows = self.candidates(fingerprint)
        if not rows:
            return []
        found = best_match(
            fingerprint.sketch, self.sketches(rows), self.threshold, fingerprint.template
        )
        if found is None:
            return []
        return [(self._doc(rows[found[0]]), found[1])]

    def _doc(self, row: int) -> int:
        ids = self._ids
        if ids is None:
            return row
        block = ids[row >> _BLOCK_BITS]
        return row if block is None else int(block[row & (_BLOCK - 1)])

    # -- additions --

    def _new_block(self) -> None:
        self._blocks.append(np.empty((_BLOCK, SKETCH_BYTES), dtype=np.uint8))
        if self._ids is not None:
            self._ids.append(np.empty(_BLOCK, dtype=np.int64))

    def _explicit_ids(self) -> list[np.ndarray | None]:
        """Doc ids from now on given per row: earlier full blocks keep theirs
        implicit (no copy of the whole index), the current one gets an array."""
        ids = self._ids
        if ids is None:
            ids = self._ids = [None] * len(self._blocks)
            if ids:
                b = len(ids) - 1
                ids[-1] = np.arange(b * _BLOCK, (b + 1) * _BLOCK, dtype=np.int64)
        return ids

    def add(self, fingerprint: Signature, doc_id: int) -> None:
        row = self._count
        offset = row & (_BLOCK - 1)
        if offset == 0:
            self._new_block()
        self._blocks[-1][offset] = fingerprint.sketch
        ids = self._ids
        if ids is None and doc_id != row:
            ids = self._explicit_ids()
        if ids is not None:
            block = ids[-1]
            assert block is not None
            block[offset] = doc_id
        self._count += 1
        keys = fingerprint.band_keys(self.bands, self.rows)
        last = self._last
        self._last = None
        reuse = last is not None and last[0] is fingerprint
        sizes = last[1] if reuse and last is not None else self._lookup(keys, [])
        slots = self._slots
        for key, size in zip(keys, sizes, strict=True):
            if size >= BUCKET_CAP:
                continue  # enough texts share this key to find their kin by it
            top = key >> 32
            shard = slots[top >> _SLOT_SHIFT]
            buffer = shard.buffer
            held = buffer.get(top)
            if held is None:
                buffer[top] = row
            else:
                buffer[top] = (*held, row) if type(held) is tuple else (held, row)
                continue
            if len(buffer) >= shard.limit:
                self._merge(shard)

    def add_many(
        self, values: np.ndarray, sketches: np.ndarray, ids: Iterable[int] | None = None
    ) -> None:
        """Bulk-load kept texts: ``values`` ``(n, 128)`` uint16 and
        ``sketches`` ``(n, 128)`` uint8 (see :meth:`MinHashMethod.decode_many`),
        doc ids ``ids`` (default: their rows). The same texts as ``add`` one
        by one, in one vectorized pass: one sort of the new entries, merged
        with the ones held (already sorted)."""
        values = np.asarray(values, dtype=np.uint16).reshape(-1, NUM_VALUES)
        sketches = np.asarray(sketches, dtype=np.uint8).reshape(-1, SKETCH_BYTES)
        n = len(values)
        if n == 0:
            return
        first = self._count
        id_list = None if ids is None else np.fromiter(ids, dtype=np.int64, count=n)
        if (
            id_list is not None
            and self._ids is None
            and not np.array_equal(id_list, np.arange(first, first + n))
        ):
            self._explicit_ids()
        done = 0
        while done < n:
            row = self._count
            offset = row & (_BLOCK - 1)
            if offset == 0:
                self._new_block()
            take = min(_BLOCK - offset, n - done)
            self._blocks[-1][offset : offset + take] = sketches[done : done + take]
            if self._ids is not None:
                block = self._ids[-1]
                assert block is not None
                source = id_list if id_list is not None else np.arange(first, first + n)
                block[offset : offset + take] = source[done : done + take]
            self._count += take
            done += take
        self._last = None
        # (key top bits, row) of the new texts, sorted: by key, then by row.
        entries = band_keys_of(values, self.bands, self.rows)
        entries &= np.uint64(_TOP32)
        entries |= np.arange(first, first + n, dtype=np.uint64)[:, None]
        entries = entries.reshape(-1)
        entries.sort()
        if first:  # the ones held come first: their rows are lower
            entries = np.concatenate((self._all_entries(), entries))
            entries.sort(kind="stable")  # a merge of sorted runs
        # Entries past the cap of a key dropped: the 8th before is of the same key.
        if len(entries) > BUCKET_CAP:
            over = (entries[BUCKET_CAP:] ^ entries[:-BUCKET_CAP]) <= np.uint64(_ROW_MASK)
            if over.any():
                keep = np.ones(len(entries), dtype=bool)
                keep[BUCKET_CAP:] = ~over
                entries = entries[keep]
            del over
        self._slots = [_Shard(0, _SLOTS, _U64, self._MIN_BUFFER)] * _SLOTS
        self._build(0, _SLOTS, entries)

    def _all_entries(self) -> np.ndarray:
        """Every entry held, as ``(top 32 bits of the key) << 32 | row``: the
        arrays (sorted) then the buffers (sorted among themselves)."""
        parts, fresh, slot = [_U64], [], 0
        while slot < _SLOTS:
            shard = self._slots[slot]
            parts.append(shard.entries)
            for top, held in shard.buffer.items():
                for row in held if type(held) is tuple else (held,):
                    fresh.append((top << 32) | row)
            slot = shard.hi
        parts.append(np.sort(np.array(fresh, dtype=np.uint64)))
        return np.concatenate(parts)

    # -- saving and restoring (a store's cache of the whole index) --

    def saved_parts(self, size: int = 1 << 22) -> Iterator[tuple[str, np.ndarray]]:
        """The index as ``("entries" | "sketches", array)`` pieces of about
        ``size`` bytes, in order, for :meth:`restore`: sorted uint64 entries,
        then ``(rows, 128)`` uint8 sketches. Doc ids must be the rows (as
        stores add them), otherwise ``ValueError``. Memory beyond the index:
        one piece at a time."""
        if self._ids is not None:
            raise ValueError("only an index whose doc ids are its rows can be saved")
        pending: list[np.ndarray] = []
        held = 0
        slot = 0
        while slot < _SLOTS:  # shards in key order: their entries, merged, are sorted
            shard = self._slots[slot]
            slot = shard.hi
            entries = shard.entries
            if shard.buffer:
                fresh = [
                    (top << 32) | row
                    for top, rows in shard.buffer.items()
                    for row in (rows if type(rows) is tuple else (rows,))
                ]
                entries = np.sort(np.concatenate((entries, np.array(fresh, dtype=np.uint64))))
            pending.append(entries)
            held += entries.nbytes
            if held >= size:
                yield "entries", np.concatenate(pending)
                pending, held = [], 0
        if pending:
            yield "entries", np.concatenate(pending)
        left = self._count
        for block in self._blocks:
            yield "sketches", block[: min(left, _BLOCK)]
            left -= _BLOCK

    def restore(self, entries: np.ndarray, sketches: np.ndarray) -> None:
        """Become the index :meth:`saved_parts` gave (this one must be empty):
        ``entries`` its entries pieces concatenated, ``sketches`` its sketches
        pieces concatenated (a writable ``(rows, 128)`` uint8 array, kept as
        the index's own: its full blocks are views of it)."""
        if self._count:
            raise ValueError("restore() needs an empty index")
        entries = np.asarray(entries, dtype=np.uint64)
        sketches = np.asarray(sketches, dtype=np.uint8).reshape(-1, SKETCH_BYTES)
        count = len(sketches)
        # Rows beyond the sketches would fail lookups; the order is trusted (a
        # wrong one only hides candidates).
        if len(entries) and int(entries.view(np.uint32)[_LOW_WORD::2].max()) >= count:
            raise ValueError("saved entries name rows the sketches lack")
        full = count >> _BLOCK_BITS << _BLOCK_BITS
        self._blocks = [sketches[i : i + _BLOCK] for i in range(0, full, _BLOCK)]
        if full < count:  # the last block, to which add() writes: one of its own
            self._new_block()
            self._blocks[-1][: count - full] = sketches[full:]
        self._count = count
        self._build(0, _SLOTS, entries)

    def nbytes(self) -> int:
        """Bytes held by the arrays (the dict buffers not counted)."""
        total = sum(int(b.nbytes) for b in self._blocks)
        total += sum(int(b.nbytes) for b in self._ids or () if b is not None)
        slot = 0
        while slot < _SLOTS:
            shard = self._slots[slot]
            total += int(shard.entries.nbytes)
            slot = shard.hi
        return total

    def _merge(self, shard: _Shard) -> None:
        """Merge the buffer of ``shard`` into its array (cost: the size of
        the shard, not of the index); cut the shard in two if it grew too large."""
        buffer = shard.buffer
        try:  # one row per key, as nearly always: no loop in Python
            rows = np.fromiter(buffer.values(), dtype=np.uint64, count=len(buffer))
        except (TypeError, ValueError):  # a tuple of rows
            added = np.array(
                [
                    (top << 32) | row
                    for top, held in buffer.items()
                    for row in (held if type(held) is tuple else (held,))
                ],
                dtype=np.uint64,
            )
        else:
            added = np.fromiter(buffer.keys(), dtype=np.uint64, count=len(buffer))
            added <<= np.uint64(32)
            added |= rows
        buffer.clear()
        added.sort()
        # Held entries first among equal keys: their rows are lower.
        entries = np.insert(shard.entries, np.searchsorted(shard.entries, added, "right"), added)
        if len(entries) > self._SPLIT and shard.hi - shard.lo > 1:
            self._build(shard.lo, shard.hi, entries, depth=1)
        else:
            shard.install(entries, added)
            shard.limit = max(self._MIN_BUFFER, len(entries) >> self._BUFFER_SHIFT)

    def _build(self, lo: int, hi: int, entries: np.ndarray, depth: int = _SLOT_BITS) -> None:
        """Install the sorted ``entries`` of slots ``lo`` to ``hi - 1`` as
        shards: cut in halves while above ``_SPLIT`` entries."""
        if depth == 0 or hi - lo == 1 or len(entries) <= self._SPLIT:
            limit = max(self._MIN_BUFFER, len(entries) >> self._BUFFER_SHIFT)
            shard = _Shard(lo, hi, entries.copy(), limit)
            self._slots[lo:hi] = [shard] * (hi - lo)
            return
        mid = (lo + hi) >> 1
        cut = int(np.searchsorted(entries, np.uint64(mid << 52)))
        self._build(lo, mid, entries[:cut], depth - 1)
        self._build(mid, hi, entries[cut:], depth - 1)
