"""StringList: the URLs of kept texts, packed; read back exactly as stored."""

from __future__ import annotations

import random

import pytest

from scrapy_dedup.stores.strings import StringList


def test_strings_come_back_as_stored_across_blocks() -> None:
    rng = random.Random(5)
    alphabet = "ab/?=&%ß日\U0001f600\udc80"  # a lone surrogate, as surrogatepass keeps it
    stored = StringList()
    expected = []
    for i in range(20_000):
        size = rng.choice([0, 1, 7, 90, 2_000])
        text = "".join(rng.choice(alphabet) for _ in range(size))
        if i % 5_000 == 1:
            text = "x" * (1 << 20) + "y"  # longer than a block
        expected.append(text)
        assert stored.append(text) == i
    assert len(stored) == len(expected)
    assert [stored[i] for i in range(len(expected))] == expected
    assert stored[-1] == expected[-1]
    with pytest.raises(IndexError):
        stored[len(expected)]
    assert stored.nbytes() <= sum(len(t.encode("utf-8", "surrogatepass")) for t in expected) + (
        8 * len(expected) + (1 << 20)
    )
    stored.clear()
    assert len(stored) == 0
    assert stored.append("again") == 0 and stored[0] == "again"


def test_extend_is_append_many_times() -> None:
    rng = random.Random(7)
    stored, expected = StringList(), []
    for round_ in range(6):
        batch = [f"https://a.example/{round_}/{i}/" + "é" * rng.randrange(50) for i in range(999)]
        if round_ % 2:
            stored.extend(batch)
        else:
            for text in batch:
                stored.append(text)
        expected += batch
    stored.extend([])
    assert len(stored) == len(expected)
    assert [stored[i] for i in range(len(expected))] == expected
