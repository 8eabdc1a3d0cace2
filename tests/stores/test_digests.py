"""DigestMap against a plain dict: the same answers for digests that share
their first 8 bytes, of other sizes, deleted and set again."""

from __future__ import annotations

import hashlib
import random

from scrapy_dedup.stores.digests import DigestMap
from scrapy_dedup.stores.memory import MemoryStore


def test_against_a_dict() -> None:
    rng = random.Random(25)
    digests = [hashlib.sha256(str(i).encode()).digest()[:16] for i in range(3000)]
    # Same first 8 bytes as another digest, and sizes other than 16.
    digests += [d[:8] + bytes(8) for d in digests[:50]] + [b"", b"short", bytes(20)]
    ours, plain = DigestMap(), {}
    for step in range(20000):
        digest = rng.choice(digests)
        action = rng.random()
        url = f"https://a.example/{step}/ß"
        if action < 0.3:
            ours[digest], plain[digest] = url, url
        elif action < 0.6:
            assert ours.setdefault(digest, url) == (plain.get(digest) if digest in plain else None)
            plain.setdefault(digest, url)
        elif action < 0.8 and digest in plain:
            del ours[digest], plain[digest]
        assert ours.get(digest) == plain.get(digest)
        assert (digest in ours) == (digest in plain)
    assert len(ours) == len(plain)
    assert all(ours.get(d) == plain.get(d) for d in digests)
    try:
        del ours[b"never set" + bytes(7)]
    except KeyError:
        pass
    else:
        raise AssertionError("deleting an unknown digest raises KeyError")


def test_memory_store_keeps_texts_in_arrays() -> None:
    store = MemoryStore()
    for i in range(1000):
        digest = hashlib.sha256(str(i).encode()).digest()[:16]
        assert store.add_content(digest, f"https://a.example/{i}") is None
        assert store.add_content(digest, "https://b.example/") == f"https://a.example/{i}"
    assert store.get_content(hashlib.sha256(b"7").digest()[:16]) == "https://a.example/7"
    assert len(store._content) == 1000 and not store._content._more
    store.clear()
    assert store.get_content(hashlib.sha256(b"7").digest()[:16]) is None
