"""A namespace filled with one DEDUP_NEAR_THRESHOLD and reopened with another
finds its earlier texts: SQLite indexes its fingerprints anew at every start,
Redis re-indexes them when the band layout changed. (A memory store lives for
one run: tests/text/test_lsh_layout.py covers it.)"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scrapy_dedup.stores import DedupStore, SqliteStore, open_store
from scrapy_dedup.text.minhash import jaccard_estimate
from scrapy_dedup.text.near import MinHashMethod
from tests.text.neardup_corpus import pairs_at_similarity

PREFIX = "scrapy-dedup-test"
Pairs = list[tuple[str, str, float]]
Opener = Callable[[], DedupStore]


@pytest.fixture(scope="module")
def pairs() -> Pairs:
    """Real texts and copies with about 12% of their words swapped (3-shingle
    Jaccard similarity about 0.55): near duplicates at 0.5, not at 0.75."""
    return pairs_at_similarity(0.55, seed=3, per_document=1)[:80]


@pytest.fixture(params=["sqlite", "redis", "redis_cluster"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Closes the store it opened last and opens the namespace again, as the next run does."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    opened: list[DedupStore] = []
    url = "" if request.param == "sqlite" else request.getfixturevalue(f"{request.param}_url")

    def opener() -> DedupStore:
        if opened:
            opened[-1].close()
        if url:
            opened.append(open_store(url, namespace, prefix=PREFIX))
        else:
            opened.append(SqliteStore(tmp_path / "dedup.db", namespace))
        return opened[-1]

    yield opener
    last = opener()
    last.clear()
    last.close()


def _keep(store: DedupStore, method: MinHashMethod, texts: list[str]) -> dict[str, str]:
    urls = {}
    for n, text in enumerate(texts):
        urls[text] = f"https://a.test/{method.threshold}/{n}"
        assert store.match_or_add_near(method, method.fingerprint(text), urls[text]) is None
    store.flush()
    return urls


def _found(store: DedupStore, method: MinHashMethod, pairs: Pairs, urls: dict[str, str]) -> float:
    """The share of the pairs the estimate confirms whose later text is found
    to be a near duplicate of the kept one."""
    confirmed = found = 0
    for a, b, _ in pairs:
        sb = method.fingerprint(b)
        if jaccard_estimate(method.fingerprint(a), sb) >= method.threshold:
            confirmed += 1
            match = store.match_near(method, sb)
            found += match is not None and match[0] == urls[a]
    assert confirmed > len(pairs) // 2
    return found / confirmed


def test_texts_kept_at_one_threshold_are_found_at_another(reopen: Opener, pairs: Pairs) -> None:
    default, low = MinHashMethod(0.75), MinHashMethod(0.5)
    first, second = pairs[:60], pairs[60:]
    store = reopen()
    urls = _keep(store, default, [a for a, _, _ in first])

    store = reopen()  # the threshold lowered: 35 bands of 3 rows
    assert _found(store, low, first, urls) >= 0.97
    urls |= _keep(store, low, [a for a, _, _ in second])
    assert _found(store, low, second, urls) >= 0.97

    store = reopen()  # and back: the texts of both runs are found again
    for text, url in urls.items():
        match = store.match_near(default, default.fingerprint(text))
        assert match is not None and match[0] == url


def _keys(redis_url: str, pattern: str) -> list[bytes]:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return list(client.scan_iter(match=pattern, count=1000))
    finally:
        client.close()


def _index_field(redis_url: str, namespace: str) -> bytes | None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        value: bytes | None = client.hget(f"{PREFIX}:{namespace}:run", "near:minhash")
        return value
    finally:
        client.close()


def test_redis_reindexes_once_and_drops_the_old_index(
    redis_url: str, pairs: Pairs, caplog: pytest.LogCaptureFixture
) -> None:
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    base = f"{PREFIX}:{namespace}"
    default, low = MinHashMethod(0.75), MinHashMethod(0.5)
    store = open_store(redis_url, namespace, prefix=PREFIX)
    try:
        urls = _keep(store, default, [a for a, _, _ in pairs])
        assert _keys(redis_url, f"{base}:n:minhash:*")
        assert _index_field(redis_url, namespace) is None  # nothing new for the default
        store.close()

        store = open_store(redis_url, namespace, prefix=PREFIX)
        with caplog.at_level(logging.INFO, logger="scrapy_dedup.stores.redis"):
            assert _found(store, low, pairs, urls) >= 0.97
        assert f"re-indexed its {len(pairs)} near-duplicate texts as 'minhash-035x003'" in (
            caplog.text
        )
        assert "they were indexed as 'minhash'" in caplog.text
        assert _index_field(redis_url, namespace) == b"minhash-035x003"
        assert not _keys(redis_url, f"{base}:n:minhash:*")
        assert len(_keys(redis_url, f"{base}:n:minhash-035x003:*")) > 200
        store.close()

        caplog.clear()
        store = open_store(redis_url, namespace, prefix=PREFIX)
        near = MinHashMethod(0.501)  # another threshold, the same layout: no re-index
        assert near.index_name == low.index_name
        with caplog.at_level(logging.INFO, logger="scrapy_dedup.stores.redis"):
            assert _found(store, near, pairs, urls) >= 0.97
        assert "re-indexed" not in caplog.text

        store.clear()
        assert not _keys(redis_url, f"{base}:n:*")
        assert _index_field(redis_url, namespace) is None
    finally:
        store.clear()  # after a failure
        store.close()


def test_redis_keeps_a_default_namespace_as_it_is(redis_url: str, pairs: Pairs) -> None:
    """Every threshold above 0.707 uses the 16 bands of 4 rows stores were
    written with: a namespace filled at 0.75 opened at 0.9 is read as it is."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    base = f"{PREFIX}:{namespace}"
    store = open_store(redis_url, namespace, prefix=PREFIX)
    try:
        urls = _keep(store, MinHashMethod(0.75), [a for a, _, _ in pairs[:20]])
        names = sorted(_keys(redis_url, f"{base}:n:*"))
        store.close()
        store = open_store(redis_url, namespace, prefix=PREFIX)
        high = MinHashMethod(0.9)
        for text, url in urls.items():
            match = store.match_near(high, high.fingerprint(text))
            assert match is not None and match[0] == url
        assert sorted(_keys(redis_url, f"{base}:n:*")) == names
        assert _index_field(redis_url, namespace) is None
    finally:
        store.clear()
        store.close()


def test_a_worker_left_on_the_old_threshold_is_caught_up_by_the_next_start(
    redis_url: str, pairs: Pairs, caplog: pytest.LogCaptureFixture
) -> None:
    """Workers of one namespace restarted one by one with a new threshold: the
    one still on the old threshold keeps texts only the old index holds. It
    says so, and the next worker to start re-indexes them."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    default, low = MinHashMethod(0.75), MinHashMethod(0.5)
    old = open_store(redis_url, namespace, prefix=PREFIX)
    new = open_store(redis_url, namespace, prefix=PREFIX)
    late = None
    try:
        urls = _keep(old, default, [a for a, _, _ in pairs[:40]])
        assert _found(new, low, pairs[:40], urls) >= 0.97  # re-indexed at its first lookup
        with caplog.at_level(logging.WARNING, logger="scrapy_dedup.stores.redis"):
            urls |= _keep(old, default, [a for a, _, _ in pairs[40:]])
        assert caplog.text.count("another worker indexes near-duplicate texts as") == 1
        assert "'minhash-035x003', this one as 'minhash'" in caplog.text
        assert _index_field(redis_url, namespace) == b""  # no index holds them all
        assert _found(new, low, pairs[40:], urls) < 0.5  # missed until a restart

        late = open_store(redis_url, namespace, prefix=PREFIX)
        assert _found(late, low, pairs, urls) >= 0.97
        assert _index_field(redis_url, namespace) == b"minhash-035x003"
    finally:
        (late or old).clear()
        for store in (old, new, late):
            if store is not None:
                store.close()
