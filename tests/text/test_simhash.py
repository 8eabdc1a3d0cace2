"""SimHash fingerprints and the SimhashIndex: stable hashes, near-duplicate
distances on real text, and index recall equal to a brute-force scan."""

from __future__ import annotations

import random
from pydoc_data.topics import topics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.text import (
    hamming,
    normalize_text,
    shingle_hashes,
    simhash,
    simhash_from_hashes,
)
from scrapy_dedup.text.simhash_index import MAX_DISTANCE, SimhashIndex

MASK64 = (1 << 64) - 1
WORDS = " ".join(topics[key] for key in sorted(topics)).split()


def real_text(start: int, words: int = 1000) -> str:
    """*words* words of Python's own documentation, from word *start* on."""
    return " ".join(WORDS[start : start + words])


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def reference_shingle_hashes(text: str, size: int = 3) -> list[int]:
    """The hash documented in shingle_hashes, one word at a time in pure Python."""
    base = 0x9E3779B97F4A7C15
    word_hashes = []
    for word in normalize_text(text).split():
        poly = sum((ord(c) + 1) * pow(base, j, 1 << 64) for j, c in enumerate(word))
        word_hashes.append(_mix(poly & MASK64))
    if not word_hashes:
        return []
    lanes = [_mix(i + 1) | 1 for i in range(size)]
    out = []
    for i in range(max(len(word_hashes) - size + 1, 1)):
        window = word_hashes[i : i + size]
        out.append(_mix(sum(k * h for k, h in zip(lanes, window, strict=False)) & MASK64))
    return out


def brute_simhash(hashes: list[int]) -> int:
    """Majority vote per bit, as in the recipe."""
    return sum(1 << b for b in range(64) if 2 * sum((h >> b) & 1 for h in hashes) > len(hashes))


def test_normalize_text() -> None:
    assert normalize_text("  Hello,\n\tWORLD \u00a0 again\u3000") == "hello, world again"
    assert normalize_text("") == ""
    assert normalize_text(" \r\n ") == ""
    assert normalize_text("ÉCOLE Straße") == "école straße"


def test_shingle_hashes_are_stable() -> None:
    # Hard-coded on purpose: changing the hash function invalidates every stored
    # fingerprint, so it must be a deliberate, visible change.
    hashes = shingle_hashes("The quick brown fox jumps over the lazy dog")
    assert hashes.dtype == np.uint64
    assert len(hashes) == 7
    assert hashes[:2].tolist() == [2026327902825629972, 13712604246042916840]
    assert simhash("The quick brown fox jumps over the lazy dog") == 2033360739548151673


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog",
        "one",
        "two words",
        "café naïve résumé Ünïcödé ΣΊΣΥΦΟΣ",
        "x\u00a0y\u2003z\u3000w\x1cv",
        "a\x00b c\x07 d",
        real_text(3000, 200),
    ],
)
def test_shingle_hashes_match_pure_python_reference(text: str) -> None:
    assert shingle_hashes(text).tolist() == reference_shingle_hashes(text)
    assert shingle_hashes(text, 1).tolist() == reference_shingle_hashes(text, 1)
    assert shingle_hashes(text, 5).tolist() == reference_shingle_hashes(text, 5)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("aAbB é\u00a0\u2003\n\t\x1f\x00Σ\U0001f600\ud800")))
def test_shingle_hashes_match_reference_on_any_text(text: str) -> None:
    assert shingle_hashes(text).tolist() == reference_shingle_hashes(text)
    assert shingle_hashes(text).tolist() == shingle_hashes(normalize_text(text)).tolist()


def test_shingle_hashes_ignore_case_and_whitespace() -> None:
    text = real_text(0, 300)
    variant = "\n\n " + text.upper().replace(" ", " \t ") + "  \r\n"
    assert shingle_hashes(variant).tolist() == shingle_hashes(text).tolist()


def test_shingle_counts() -> None:
    assert len(shingle_hashes("")) == 0
    assert len(shingle_hashes("   \n")) == 0
    assert len(shingle_hashes("one")) == 1
    assert len(shingle_hashes("one two")) == 1
    assert len(shingle_hashes("one two three")) == 1
    assert len(shingle_hashes("one two three four")) == 2
    assert len(shingle_hashes(real_text(0))) == 998
    # A short text's only shingle is all its words, like the recipe's.
    assert shingle_hashes("one two").tolist() == shingle_hashes("One  TWO").tolist()
    # Repeated shingles are kept.
    assert len(shingle_hashes("a b c a b c a b c")) == 7
    with pytest.raises(ValueError, match="size"):
        shingle_hashes("a b c", 0)


def test_ascii_and_unicode_paths_agree() -> None:
    text = real_text(5000, 100)
    assert text.isascii()
    plain = shingle_hashes(text)
    mixed = shingle_hashes(text + " é")
    assert mixed[: len(plain)].tolist() == plain.tolist()


def test_simhash_identical_and_variants() -> None:
    text = real_text(10000)
    assert simhash(text) == simhash(real_text(10000))
    assert simhash(text) == simhash(text.upper())
    assert simhash(text) == simhash("  " + text.replace(" ", "\n\t ") + "\n")
    assert simhash("") == 0
    assert simhash(" \n ") == 0


def test_simhash_of_one_word_edit_is_close() -> None:
    words = WORDS[20000:21000]
    edited = [*words[:500], "zebra", *words[501:]]
    distance = hamming(simhash(" ".join(words)), simhash(" ".join(edited)))
    assert 0 <= distance <= 8


def test_simhash_of_unrelated_texts_is_far() -> None:
    distance = hamming(simhash(real_text(0)), simhash(real_text(40000)))
    assert 18 <= distance <= 46


def test_simhash_from_hashes_matches_majority_vote() -> None:
    rng = np.random.default_rng(7)
    for count in (1, 2, 3, 127, 128, 129, 1000, 3001):
        hashes = rng.integers(0, 2**64, size=count, dtype=np.uint64)
        assert simhash_from_hashes(hashes) == brute_simhash(hashes.tolist())
    # Ties give 0; duplicates count as often as they occur.
    assert simhash_from_hashes(np.array([1, 2], dtype=np.uint64)) == 0
    assert simhash_from_hashes(np.array([1, 1, 2], dtype=np.uint64)) == 1
    assert simhash_from_hashes(np.array([], dtype=np.uint64)) == 0
    text = real_text(7000)
    assert simhash(text) == brute_simhash(reference_shingle_hashes(text))


def test_hamming() -> None:
    assert hamming(0, 0) == 0
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(0, MASK64) == 64
    rng = random.Random(3)
    for _ in range(100):
        a, b = rng.getrandbits(64), rng.getrandbits(64)
        assert hamming(a, b) == bin(a ^ b).count("1")


def brute_query(stored: list[tuple[int, int]], query: int, k: int) -> list[tuple[int, int]]:
    hits = [(doc, (fp ^ query).bit_count()) for fp, doc in stored]
    return sorted(((d, dist) for d, dist in hits if dist <= k), key=lambda x: (x[1], x[0]))


def flip(fingerprint: int, bits: int, rng: random.Random) -> int:
    for b in rng.sample(range(64), bits):
        fingerprint ^= 1 << b
    return fingerprint


@pytest.mark.parametrize("k", range(MAX_DISTANCE + 1))
def test_index_recall_equals_brute_force(k: int) -> None:
    rng = random.Random(1000 + k)
    index = SimhashIndex(max_distance=k)
    stored: list[tuple[int, int]] = []
    centers: list[int] = []
    doc = 0
    # 2600 random fingerprints, interleaved with neighbours planted at every
    # distance 0..k+2 from a few centres, and queries; the buffer merges every
    # 1024 entries, so queries hit the sorted part, the buffer and both.
    for step in range(2600):
        fingerprint = rng.getrandbits(64)
        index.add(fingerprint, doc)
        stored.append((fingerprint, doc))
        doc += 1
        if step % 50 == 0:
            center = rng.getrandbits(64)
            centers.append(center)
            for distance in range(k + 3):
                for _ in range(2):
                    neighbour = flip(center, distance, rng)
                    index.add(neighbour, doc)
                    stored.append((neighbour, doc))
                    doc += 1
        if step % 25 == 0:
            for center in rng.sample(centers, min(3, len(centers))):
                query = flip(center, rng.randrange(k + 3), rng)
                assert index.query(query) == brute_query(stored, query, k)
    assert len(index) == len(stored)
    for center in centers:
        result = index.query(center)
        assert result == brute_query(stored, center, k)
        assert len(result) >= 2 * (k + 1)
    # Saved state reloads into an index that answers the same.
    fingerprints, doc_ids = index.arrays()
    assert list(zip(fingerprints.tolist(), doc_ids.tolist(), strict=True)) == stored
    reloaded = SimhashIndex(max_distance=k)
    reloaded.update(fingerprints, doc_ids)
    for center in centers[:10]:
        assert reloaded.query(center) == index.query(center)


def test_index_edge_values() -> None:
    index = SimhashIndex(max_distance=2)
    assert index.query(0) == []
    index.add(0, 1)
    index.add(MASK64, 2)
    index.add(MASK64 ^ 0b11, 3)
    index.add(0, 1)  # the same entry twice is two entries
    assert index.query(0) == [(1, 0), (1, 0)]
    assert index.query(MASK64) == [(2, 0), (3, 2)]
    assert len(index) == 4
    with pytest.raises(ValueError, match="64-bit"):
        index.add(-1, 4)
    with pytest.raises(ValueError, match="64-bit"):
        index.query(1 << 64)


@pytest.mark.parametrize("k", [-1, MAX_DISTANCE + 1, 64])
def test_index_max_distance_out_of_range(k: int) -> None:
    with pytest.raises(ValueError, match=f"between 0 and {MAX_DISTANCE}"):
        SimhashIndex(max_distance=k)


def test_index_update_in_bulk() -> None:
    rng = np.random.default_rng(5)
    fingerprints = rng.integers(0, 2**64, size=20000, dtype=np.uint64)
    index = SimhashIndex(max_distance=3)
    index.update(fingerprints, np.arange(20000))
    index.add(int(fingerprints[7]) ^ 0b101, 20000)
    stored = list(zip(fingerprints.tolist(), range(20000), strict=True))
    stored.append((int(fingerprints[7]) ^ 0b101, 20000))
    for query in [int(fingerprints[7]), int(fingerprints[19999]) ^ 1 << 63, 12345]:
        assert index.query(query) == brute_query(stored, query, 3)
    with pytest.raises(ValueError, match="same length"):
        index.update(fingerprints, np.arange(3))
    with pytest.raises(ValueError, match="unsigned"):
        index.update(np.array([-1]), np.array([1]))


@settings(max_examples=200, deadline=None)
@given(
    k=st.integers(0, MAX_DISTANCE),
    base=st.integers(0, MASK64),
    masks=st.lists(st.integers(0, MASK64), max_size=40),
    sparse=st.lists(st.integers(0, 63), max_size=6),
    query_mask=st.integers(0, MASK64),
)
def test_index_matches_brute_force_on_any_set(
    k: int, base: int, masks: list[int], sparse: list[int], query_mask: int
) -> None:
    # Entries near one base (so distances around k are common), plus the query
    # itself with a few bits flipped.
    stored = []
    for i, mask in enumerate(masks):
        low_weight = mask & (mask >> 7) & (mask >> 13) & (mask >> 29)
        stored.append((base ^ (low_weight if i % 2 else mask), i))
    index = SimhashIndex(max_distance=k)
    for fingerprint, doc in stored:
        index.add(fingerprint, doc)
    query = base ^ sum(1 << b for b in set(sparse))
    assert index.query(query) == brute_query(stored, query, k)
    assert index.query(base ^ query_mask) == brute_query(stored, base ^ query_mask, k)
