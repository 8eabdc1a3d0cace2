"""The content stage's decision on the labelled set of real text."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_dedup.stores import MemoryStore
from scrapy_dedup.text.minhash import MinHashLSH, jaccard_estimate, signature
from scrapy_dedup.text.near import MinHashMethod, SimhashMethod
from scrapy_dedup.text.shingles import shingle_hashes
from tests.text.neardup_corpus import (
    KINDS_NEGATIVE,
    KINDS_POSITIVE,
    Pair,
    documents,
    labelled_pairs,
    shingle_jaccard,
)


def _second_is_duplicate(method: MinHashMethod | SimhashMethod, a: str, b: str) -> bool:
    store = MemoryStore()
    assert store.match_or_add_near(method, method.fingerprint(a), "a") is None
    return store.match_or_add_near(method, method.fingerprint(b), "b") is not None


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    return labelled_pairs(seed=3, per_kind=25)


def test_default_method_catches_every_edit_up_to_2_percent(pairs: list[Pair]) -> None:
    method = MinHashMethod()
    for kind in KINDS_POSITIVE:
        if kind in ("exact", "case_whitespace"):
            continue  # the exact digest's job
        caught = [_second_is_duplicate(method, p.a, p.b) for p in pairs if p.kind == kind]
        assert sum(caught) / len(caught) >= 0.95, kind


def test_default_method_never_drops_a_different_document(pairs: list[Pair]) -> None:
    method = MinHashMethod()
    for kind in KINDS_NEGATIVE:
        dropped = [p for p in pairs if p.kind == kind and _second_is_duplicate(method, p.a, p.b)]
        assert not dropped, kind
    store = MemoryStore()
    docs = documents(seed=3)
    matches = [
        store.match_or_add_near(method, method.fingerprint(d), str(i)) for i, d in enumerate(docs)
    ]
    assert matches == [None] * len(docs)


SHORT_DIFFERENT = [
    (
        "Apple iPhone 15 Pro Max smartphone unlocked with 256GB",
        "Apple iPhone 15 Pro Max smartphone unlocked with 512GB",
    ),
    (
        "Harry Potter and the Philosopher's Stone, chapter 1",
        "Harry Potter and the Philosopher's Stone, chapter 2",
    ),
    (
        "Order 1 shipped to customer Alice on Monday morning from warehouse 7",
        "Order 2 shipped to customer Alice on Monday morning from warehouse 7",
    ),
]


@pytest.mark.parametrize(("a", "b"), SHORT_DIFFERENT)
def test_a_changed_first_or_last_word_weighs_like_any_other(a: str, b: str) -> None:
    """Marker words pad both ends, so an edge word is in 3 shingles too."""
    assert not _second_is_duplicate(MinHashMethod(), a, b)


def test_the_recipes_radius_is_a_near_exact_detector(pairs: list[Pair]) -> None:
    method = SimhashMethod(3)
    swaps = [p for p in pairs if p.kind == "word_swap_2pct"]
    assert sum(_second_is_duplicate(method, p.a, p.b) for p in swaps) / len(swaps) < 0.5


def test_minhash_estimates_the_shingle_jaccard(pairs: list[Pair]) -> None:
    """The 128-byte sketch (512 values of 2 bits) is within +-0.04 of the
    true 3-shingle Jaccard similarity for 9 pairs in 10."""
    errors = []
    for p in pairs:
        a, b = signature(shingle_hashes(p.a)), signature(shingle_hashes(p.b))
        errors.append(abs(jaccard_estimate(a, b) - shingle_jaccard(p.a, p.b)))
    assert np.mean(errors) < 0.025
    assert np.quantile(errors, 0.9) < 0.04
    assert max(errors) < 0.12


def test_minhash_is_stable_whatever_the_order_and_repeats() -> None:
    rng = np.random.default_rng(7)
    hashes = rng.integers(0, 2**63, size=20_000, dtype=np.uint64)
    whole = signature(hashes)
    assert whole == signature(hashes[::-1])
    assert whole == signature(np.concatenate([hashes, hashes[:100]]))
    short = signature(hashes[:5])  # most bins empty: densified
    assert short == signature(hashes[:5][::-1])
    assert jaccard_estimate(short, short) == 1.0
    # a fixed value: signatures must compare across processes and versions
    fixed = signature(
        np.array(
            [0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x5555AAAA5555AAAA, 0x9E3779B97F4A7C15],
            dtype=np.uint64,
        )
    )
    assert fixed.values[:4].tolist() == FIXED_VALUES
    assert fixed.sketch[:4].tobytes().hex() == FIXED_SKETCH


FIXED_VALUES = [26505, 43605, 43605, 39030]
FIXED_SKETCH = "79505936"


def test_lsh_finds_what_it_stored_and_rejects_bad_parameters() -> None:
    lsh = MinHashLSH()
    rng = np.random.default_rng(1)
    sigs = [signature(rng.integers(0, 2**63, size=300, dtype=np.uint64)) for _ in range(50)]
    for i, sig in enumerate(sigs):
        lsh.add(sig, i)
    for i, sig in enumerate(sigs):
        assert lsh.query(sig) == [(i, 1.0)]
    with pytest.raises(ValueError):
        MinHashLSH(num_perm=128, bands=40, rows=4)  # the bands need 160 values
    with pytest.raises(ValueError):
        MinHashLSH(threshold=0)
