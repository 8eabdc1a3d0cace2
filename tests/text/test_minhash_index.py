"""MinHashLSH files every text as a plain dict of band key -> first 8 rows
would: one by one, in bulk, mixed, across buffer merges and shard splits."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from scrapy_dedup.text._hashing import GOLDEN, mix64_array
from scrapy_dedup.text.minhash import (
    BUCKET_CAP,
    NUM_VALUES,
    SKETCH_BYTES,
    MinHashLSH,
    Signature,
    band_keys_of,
)


def _reference_band_keys(values: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """The band keys as first written (a loop over rows): their values must not change."""
    v = values[:, : bands * rows].astype(np.uint64).reshape(len(values), bands, rows)
    key = np.zeros((len(values), bands), dtype=np.uint64)
    for r in range(rows):
        if r and r % 4 == 0:
            key = mix64_array(key)
        key ^= v[:, :, r] << np.uint64(16 * (r % 4))
    key += (np.arange(1, bands + 1, dtype=np.uint64) * np.uint64(GOLDEN))[None, :]
    return mix64_array(key)


class Reference:
    """Band key (top 32 bits) -> rows, at most BUCKET_CAP, the first ones."""

    def __init__(self, bands: int, rows: int) -> None:
        self.bands, self.rows = bands, rows
        self.buckets: dict[int, list[int]] = {}
        self.count = 0

    def keys(self, values: np.ndarray) -> list[int]:
        return [k >> 32 for k in band_keys_of(values[None, :], self.bands, self.rows)[0].tolist()]

    def candidates(self, values: np.ndarray) -> set[int]:
        return {r for k in self.keys(values) for r in self.buckets.get(k, ())}

    def add(self, values: np.ndarray) -> None:
        for k in self.keys(values):
            bucket = self.buckets.setdefault(k, [])
            if len(bucket) < BUCKET_CAP:
                bucket.append(self.count)
        self.count += 1


def _values(rng: np.random.Generator, n: int, shared: int) -> np.ndarray:
    """``n`` signatures' values; each band picked from ``shared`` patterns
    half of the time (keys shared by many texts, past the cap), else random."""
    values = rng.integers(0, 1 << 16, size=(n, NUM_VALUES), dtype=np.uint16)
    patterns = rng.integers(0, 1 << 16, size=(shared, NUM_VALUES), dtype=np.uint16)
    for i in range(n):
        for band in range(0, NUM_VALUES, 4):
            if rng.random() < 0.5:
                values[i, band : band + 4] = patterns[rng.integers(shared), band : band + 4]
    return values


def _sig(values: np.ndarray, sketch: np.ndarray) -> Signature:
    return Signature(values, sketch)


@pytest.fixture
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MinHashLSH, "_SPLIT", 64)
    monkeypatch.setattr(MinHashLSH, "_MIN_BUFFER", 4)


def _check(index: MinHashLSH, ref: Reference, values: np.ndarray, sketches: np.ndarray) -> None:
    for i in range(len(values)):
        fp = _sig(values[i], sketches[i])
        assert set(index.candidates(fp)) == ref.candidates(values[i])


@pytest.mark.parametrize(("bands", "rows"), [(16, 4), (19, 3), (10, 6)])
@pytest.mark.parametrize("small", [False, True])
def test_one_by_one_matches_the_reference(
    bands: int, rows: int, small: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if small:
        monkeypatch.setattr(MinHashLSH, "_SPLIT", 64)
        monkeypatch.setattr(MinHashLSH, "_MIN_BUFFER", 4)
    rng = np.random.default_rng(bands * 10 + rows + small)
    n = 1500
    values = _values(rng, n, shared=6)
    sketches = rng.integers(0, 256, size=(n, SKETCH_BYTES), dtype=np.uint8)
    index = MinHashLSH(bands=bands, rows=rows)
    ref = Reference(bands, rows)
    for i in range(n):
        fp = _sig(values[i], sketches[i])
        if i % 3:  # query first (add reuses what it found), or add directly
            assert set(index.candidates(fp)) == ref.candidates(values[i])
        index.add(fp, i)
        ref.add(values[i])
    assert len(index) == n
    _check(index, ref, values, sketches)
    # Every bucket held at most BUCKET_CAP rows, and full buckets exist.
    assert max(len(b) for b in ref.buckets.values()) == BUCKET_CAP
    if small:
        shards = {id(s) for s in index._slots}
        assert len(shards) > 8  # the shards were split


@pytest.mark.usefixtures("small_shards")
def test_bulk_and_mixed_loads_match_the_reference() -> None:
    rng = np.random.default_rng(7)
    n = 2400
    values = _values(rng, n, shared=5)
    sketches = rng.integers(0, 256, size=(n, SKETCH_BYTES), dtype=np.uint8)
    bulk = MinHashLSH()
    bulk.add_many(values, sketches)
    ref = Reference(16, 4)
    for i in range(n):
        ref.add(values[i])
    _check(bulk, ref, values, sketches)
    # Mixed: one by one, then in bulk, then one by one, then in bulk again.
    mixed = MinHashLSH()
    cuts = [0, 300, 900, 1300, 2000, n]
    for part, (lo, hi) in enumerate(pairwise(cuts)):
        if part % 2:
            mixed.add_many(values[lo:hi], sketches[lo:hi], range(lo, hi))
        else:
            for i in range(lo, hi):
                fp = _sig(values[i], sketches[i])
                mixed.query(fp)
                mixed.add(fp, i)
    assert len(mixed) == n
    _check(mixed, ref, values, sketches)
    # The same texts as one by one, found by query with their doc ids.
    for i in range(0, n, 97):
        found = mixed.query(_sig(values[i], sketches[i]))
        assert found and found[0][1] == 1.0
        assert np.array_equal(sketches[found[0][0]], sketches[i])


def test_explicit_doc_ids_and_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("scrapy_dedup.text.minhash._BLOCK_BITS", 6)
    monkeypatch.setattr("scrapy_dedup.text.minhash._BLOCK", 64)
    rng = np.random.default_rng(3)
    n = 300
    values = rng.integers(0, 1 << 16, size=(n, NUM_VALUES), dtype=np.uint16)
    sketches = rng.integers(0, 256, size=(n, SKETCH_BYTES), dtype=np.uint8)
    index = MinHashLSH()
    index.add_many(values[:100], sketches[:100])  # doc ids = rows
    for i in range(100, 200):
        index.add(_sig(values[i], sketches[i]), i)
    for i in range(200, 250):  # doc ids that are not the rows, from mid-block
        index.add(_sig(values[i], sketches[i]), 10_000 + i)
    index.add_many(values[250:], sketches[250:], range(20_250, 20_300))
    for i in range(n):
        found = index.query(_sig(values[i], sketches[i]))
        want = i if i < 200 else 10_000 + i if i < 250 else 20_000 + i
        assert found == [(want, 1.0)]


@pytest.mark.parametrize(
    ("bands", "rows"), [(16, 4), (24, 4), (19, 3), (49, 2), (128, 1), (12, 9)]
)
def test_band_key_values_never_change(bands: int, rows: int) -> None:
    rng = np.random.default_rng(bands)
    values = rng.integers(0, 1 << 16, size=(50, NUM_VALUES), dtype=np.uint16)
    want = _reference_band_keys(values, bands, rows)
    assert np.array_equal(band_keys_of(values, bands, rows), want)
    for i in range(5):
        sig = Signature(values[i], np.zeros(SKETCH_BYTES, dtype=np.uint8))
        assert sig.band_keys(bands, rows) == want[i].tolist()
        # a view that is not contiguous, or not uint16, gives the same keys
        odd = Signature(values[i].astype(np.int64), sig.sketch)
        assert odd.band_keys(bands, rows) == want[i].tolist()
