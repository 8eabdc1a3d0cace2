"""The labelled near-duplicate evaluation set is what it says: real text, the stated edits,
deterministic, and quick to build."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from tests.text.neardup_corpus import (
    CITIES,
    KINDS_NEGATIVE,
    KINDS_POSITIVE,
    Pair,
    documents,
    labelled_pairs,
    shingle_jaccard,
    summary,
)

ROOT = Path(__file__).resolve().parents[2]
SWAPPED = {"word_swap_0.5pct": 0.005, "word_swap_1pct": 0.01, "word_swap_2pct": 0.02}
# A few of the commonest English words, independent of the corpus module.
COMMON = {"the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "with", "be"}
COMMON |= {"by", "on", "or", "this", "an", "are", "if", "not", "from", "at", "which", "will"}

BUILD = """
import hashlib, json, time
t = time.perf_counter()
import tests.text.neardup_corpus as c
docs = c.documents()
pairs = c.labelled_pairs()
elapsed = time.perf_counter() - t
h = hashlib.sha256(json.dumps([docs, [list(vars(p).values()) for p in pairs]]).encode())
print(json.dumps({"digest": h.hexdigest(), "elapsed": elapsed}))
"""


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    return labelled_pairs()


def of_kind(pairs: list[Pair], kind: str) -> list[Pair]:
    return [p for p in pairs if p.kind == kind]


def differing_positions(a: str, b: str) -> int:
    wa, wb = a.split(), b.split()
    assert len(wa) == len(wb)
    return sum(x != y for x, y in zip(wa, wb, strict=True))


def build_in_subprocess(hash_seed: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", BUILD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_build_is_deterministic_and_fast() -> None:
    # Fresh interpreters with different hash seeds: no cache, no set-order luck.
    first, second = build_in_subprocess("1"), build_in_subprocess("2")
    assert first["digest"] == second["digest"]
    assert max(first["elapsed"], second["elapsed"]) < 5


def test_same_seed_same_pairs_other_seed_other_pairs() -> None:
    assert labelled_pairs(seed=3, per_kind=5) == labelled_pairs(seed=3, per_kind=5)
    assert labelled_pairs(seed=3, per_kind=5) != labelled_pairs(seed=4, per_kind=5)
    assert documents(seed=3) == documents(seed=3)


@pytest.mark.parametrize("per_kind", [60, 7])
def test_every_kind_has_per_kind_pairs_with_its_label(per_kind: int) -> None:
    pairs = labelled_pairs(per_kind=per_kind)
    assert Counter(p.kind for p in pairs) == {k: per_kind for k in KINDS_POSITIVE + KINDS_NEGATIVE}
    assert not set(KINDS_POSITIVE) & set(KINDS_NEGATIVE)
    for p in pairs:
        assert p.duplicate == (p.kind in KINDS_POSITIVE)
        assert p.words == len(p.a.split())
        assert (p.a == p.b) == (p.kind == "exact")


def test_documents_are_many_distinct_and_within_bounds() -> None:
    docs = documents()
    assert len(docs) >= 150
    assert len(set(docs)) == len(docs)
    assert all(250 <= len(d.split()) <= 1500 for d in docs)
    assert all(300 <= len(d.split()) <= 800 for d in documents(300, 800))


def test_no_two_documents_are_near_duplicates() -> None:
    shingles = []
    for doc in documents():
        w = doc.lower().split()
        shingles.append({tuple(w[i : i + 3]) for i in range(len(w) - 2)})
    worst = max(len(x & y) / len(x | y) for x, y in combinations(shingles, 2))
    assert worst < 0.15


def test_texts_are_real_english(pairs: list[Pair]) -> None:
    texts = documents() + [t for p in pairs for t in (p.a, p.b)]
    for text in texts:
        assert not re.search(r"lorem|ipsum", text, re.IGNORECASE)
        words = [w.strip(".,;:()\"'*").lower() for w in text.split()]
        assert sum(w in COMMON for w in words) >= 0.15 * len(words)


def test_positives_have_words_within_bounds(pairs: list[Pair]) -> None:
    for p in pairs:
        if p.duplicate:
            assert 250 <= p.words <= 1500, p.kind


@pytest.mark.parametrize("kind", sorted(SWAPPED))
def test_word_swaps_change_exactly_the_stated_number_of_words(
    pairs: list[Pair], kind: str
) -> None:
    for p in of_kind(pairs, kind):
        assert differing_positions(p.a, p.b) == max(1, round(p.words * SWAPPED[kind]))


def test_heavy_edit_replaces_a_quarter_of_the_words(pairs: list[Pair]) -> None:
    for p in of_kind(pairs, "heavy_edit_25pct"):
        assert differing_positions(p.a, p.b) == round(p.words * 0.25)


def test_insert_delete_deletes_and_inserts_half_each(pairs: list[Pair]) -> None:
    for p in of_kind(pairs, "insert_delete_2pct"):
        edits = max(2, round(p.words * 0.02))
        assert len(p.b.split()) - p.words == (edits - edits // 2) - edits // 2
        assert Counter(p.a.split()) - Counter(p.b.split()), "nothing deleted"


def test_case_whitespace_is_an_exact_duplicate_after_normalization(pairs: list[Pair]) -> None:
    for p in of_kind(pairs, "case_whitespace"):
        assert p.a != p.b
        assert p.a.casefold().split() == p.b.casefold().split()


def test_moved_sentence_keeps_the_words_in_another_order(pairs: list[Pair]) -> None:
    for p in of_kind(pairs, "moved_sentence"):
        assert p.a.split() != p.b.split()
        assert sorted(p.a.split()) == sorted(p.b.split())


def test_city_swap_changes_only_the_city(pairs: list[Pair]) -> None:
    for p in of_kind(pairs, "city_swap"):
        old = max((c for c in CITIES if c in p.a), key=p.a.count)
        assert any(
            p.a.replace(old, new).replace(old.upper(), new.upper()) == p.b
            for new in CITIES
            if new != old
        )


def test_sku_change_changes_only_sku_and_price(pairs: list[Pair]) -> None:
    for p in of_kind(pairs, "sku_change"):
        changed = [(x, y) for x, y in zip(p.a.split(), p.b.split(), strict=True) if x != y]
        assert any(re.fullmatch(r"[A-Z]{2}-\d{4}-[A-Z]{3}", y) for _, y in changed)
        assert all(re.fullmatch(r"[A-Z]{2}-\d{4}-[A-Z]{3}|£\d+\.\d\d", y) for _, y in changed)


def test_negatives_differ_substantially(pairs: list[Pair]) -> None:
    for p in pairs:
        if not p.duplicate:
            assert shingle_jaccard(p.a, p.b) < 0.5, p.kind
            if p.kind in ("unrelated", "same_source"):
                assert shingle_jaccard(p.a, p.b) < 0.15, p.kind


def test_shared_template_shares_header_and_footer_not_body(pairs: list[Pair]) -> None:
    for p in of_kind(pairs, "shared_template"):
        a, b = p.a.split("\n\n"), p.b.split("\n\n")
        assert a[0] == b[0] and a[-1] == b[-1]
        assert len(a[0].split()) >= 50 and len(a[-1].split()) >= 50
        bodies = "\n\n".join(a[1:-1]), "\n\n".join(b[1:-1])
        assert all(len(body.split()) >= 250 for body in bodies)
        assert shingle_jaccard(*bodies) < 0.15


def test_summary_names_every_kind() -> None:
    text = summary(per_kind=5)
    for kind in KINDS_POSITIVE + KINDS_NEGATIVE:
        assert kind in text
