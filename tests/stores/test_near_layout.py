"""A namespace filled with one DEDUP_NEAR_THRESHOLD and reopened with another:
SQLite indexes its fingerprints anew at every start and finds the earlier
texts; Redis refuses a run whose band layout is another one, at start, with a
message saying what fits (re-indexing while other workers write cannot be made
safe). (A memory store lives for one run: tests/text/test_lsh_layout.py.)"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.stores import DedupStore, SqliteStore, StoreError, open_store
from scrapy_dedup.text.minhash import jaccard_estimate
from scrapy_dedup.text.near import MinHashMethod
from tests.conftest import crawl
from tests.crawl_worker import NewsSpider
from tests.site import Site, store_stage_routes
from tests.test_store_crawls import ADDON
from tests.text.neardup_corpus import pairs_at_similarity

PREFIX = "scrapy-dedup-test"
Pairs = list[tuple[str, str, float]]
Opener = Callable[[], DedupStore]


@pytest.fixture(scope="module")
def pairs() -> Pairs:
    """Real texts and copies with about 12% of their words swapped (3-shingle
    Jaccard similarity about 0.55): near duplicates at 0.5, not at 0.75."""
    return pairs_at_similarity(0.55, seed=3, per_document=1)[:80]


@pytest.fixture
def reopen(tmp_path: Path) -> Iterator[Opener]:
    """Closes the SQLite store it opened last and opens the namespace again,
    as the next run does."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    opened: list[DedupStore] = []

    def opener() -> DedupStore:
        if opened:
            opened[-1].close()
        opened.append(SqliteStore(tmp_path / "dedup.db", namespace))
        return opened[-1]

    yield opener
    opened[-1].close()


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


def _keys(store: DedupStore, pattern: str) -> list[bytes]:
    return list(store.client.scan_iter(match=pattern, count=1000))  # type: ignore[attr-defined]


def _index_field(redis_url: str, namespace: str, value: bytes | None = b"") -> bytes | None:
    """The namespace's ``near:minhash2`` field; deleted first when ``value`` is
    None (as a namespace written before the field existed has it)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        if value is None:
            client.hdel(f"{PREFIX}:{namespace}:run", "near:minhash2")
        found: bytes | None = client.hget(f"{PREFIX}:{namespace}:run", "near:minhash2")
        return found
    finally:
        client.close()


@pytest.fixture(params=["redis", "redis_cluster"])
def any_redis(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


def test_redis_refuses_another_layout_and_says_what_fits(any_redis: str, pairs: Pairs) -> None:
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    default, low = MinHashMethod(0.75), MinHashMethod(0.5)
    store = open_store(any_redis, namespace, prefix=PREFIX)
    try:
        urls = _keep(store, default, [a for a, _, _ in pairs[:30]])
        store.close()

        store = open_store(any_redis, namespace, prefix=PREFIX)
        with pytest.raises(StoreError) as refused:
            store.use_near(low)
        message = str(refused.value)
        assert f"namespace {namespace!r} of " in message
        assert "indexed for DEDUP_NEAR_THRESHOLD from 0.708 to 1.000" in message
        assert "index 'minhash2-035x003'" in message
        assert "DEDUP_RESET=1" in message and "DEDUP_NAMESPACE" in message
        with pytest.raises(StoreError):  # not by a lookup either
            store.match_near(low, low.fingerprint(pairs[0][1]))
        high = MinHashMethod(0.9)  # the same 16 bands of 4 rows: its texts are found
        store.use_near(high)
        for text, url in urls.items():
            match = store.match_near(high, high.fingerprint(text))
            assert match is not None and match[0] == url
        assert not _keys(store, f"{PREFIX}:{namespace}:n:minhash2-035x003:*")

        store.clear()  # DEDUP_RESET: the namespace starts over, any layout fits
        store.use_near(low)
        urls = _keep(store, low, [a for a, _, _ in pairs[30:]])
        assert _found(store, low, pairs[30:], urls) >= 0.97
        store.close()
        store = open_store(any_redis, namespace, prefix=PREFIX)
        with pytest.raises(
            StoreError, match=r"indexed for DEDUP_NEAR_THRESHOLD from 0\.500 to 0\.502"
        ):
            store.use_near(default)
    finally:
        store.clear()
        store.close()


def test_redis_claims_an_unclaimed_namespace_for_the_index_that_holds_its_texts(
    redis_url: str, pairs: Pairs, caplog: pytest.LogCaptureFixture
) -> None:
    """No ``near:minhash2`` claim (lost with a failover, or deleted by a
    reset in progress), texts kept at 0.75: claimed for their index, so 0.5 is
    refused and 0.9 reads them. Texts of an earlier version's MinHash are
    said to be incomparable."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    default, low = MinHashMethod(0.75), MinHashMethod(0.5)
    store = open_store(redis_url, namespace, prefix=PREFIX)
    try:
        urls = _keep(store, default, [a for a, _, _ in pairs[:20]])
        store.close()
        assert _index_field(redis_url, namespace, None) is None

        store = open_store(redis_url, namespace, prefix=PREFIX)
        with pytest.raises(StoreError, match=r"from 0\.708 to 1\.000"):
            store.use_near(low)
        assert _index_field(redis_url, namespace) == b"minhash2-016x004"
        store.close()

        assert _index_field(redis_url, namespace, None) is None
        store = open_store(redis_url, namespace, prefix=PREFIX)
        for text, url in urls.items():
            match = store.match_near(default, default.fingerprint(text))
            assert match is not None and match[0] == url
        assert _index_field(redis_url, namespace) == b"minhash2-016x004"
        assert "earlier scrapy-dedup version" not in caplog.text
        store.close()

        # An earlier version kept texts under its own method's name.
        store = open_store(redis_url, namespace, prefix=PREFIX)
        store.client.hset(f"{PREFIX}:{namespace}:d:minhash:3f", "doc", "old")  # type: ignore[attr-defined]
        _index_field(redis_url, namespace, None)
        with caplog.at_level(logging.WARNING):
            store.use_near(MinHashMethod(0.9))
        assert "near-duplicate texts kept by an earlier scrapy-dedup version" in caplog.text
        assert "DEDUP_RESET=1" in caplog.text
    finally:
        store.clear()
        store.close()


def test_of_two_workers_starting_with_different_thresholds_the_second_refuses(
    redis_url: str,
) -> None:
    """Both start on an empty namespace: the first to look claims the layout."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    first = open_store(redis_url, namespace, prefix=PREFIX)
    second = open_store(redis_url, namespace, prefix=PREFIX)
    try:
        first.use_near(MinHashMethod(0.5))
        assert _index_field(redis_url, namespace) == b"minhash2-035x003"
        with pytest.raises(StoreError, match=r"DEDUP_NEAR_THRESHOLD from 0\.500 to 0\.502"):
            second.use_near(MinHashMethod(0.75))
        second.use_near(MinHashMethod(0.5))
    finally:
        first.clear()
        first.close()
        second.close()


@deferred_f_from_coro_f
async def test_a_crawl_with_another_threshold_on_a_redis_namespace_does_not_start(
    fresh_site: Site, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As a user meets it: the second crawl fetches nothing and says why."""
    fresh_site.routes.update(store_stage_routes()[0])
    prefix = f"{PREFIX}-{uuid.uuid4().hex[:8]}"
    settings = {**ADDON, "DEDUP_STORE": redis_url, "DEDUP_REDIS_PREFIX": prefix}
    first = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert first.items
    fresh_site.reset()
    with pytest.raises(StoreError):
        await crawl(
            NewsSpider, {**settings, "DEDUP_NEAR_THRESHOLD": 0.5}, start=fresh_site.url("/")
        )
    assert fresh_site.fetched() == []
    assert "Cannot use the dedup store: namespace 'news' of redis://" in caplog.text
    # Starting over is one setting away.
    third = await crawl(
        NewsSpider,
        {**settings, "DEDUP_NEAR_THRESHOLD": 0.5, "DEDUP_RESET": True},
        start=fresh_site.url("/"),
    )
    assert len(third.items) == len(first.items)
    store = open_store(redis_url, "news", prefix=prefix)
    store.clear()
    store.close()


def test_a_reset_by_another_worker_is_noticed_at_the_next_lookup(
    redis_url: str, pairs: Pairs
) -> None:
    """Worker A runs at 0.5; B starts with DEDUP_RESET at 0.75 and claims the
    emptied namespace. A's next lookup fails loudly (its texts would go to an
    index B never reads) instead of filing them there."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    low, default = MinHashMethod(0.5), MinHashMethod(0.75)
    a = open_store(redis_url, namespace, prefix=PREFIX)
    b = open_store(redis_url, namespace, prefix=PREFIX)
    try:
        a.use_near(low)
        _keep(a, low, [x for x, _, _ in pairs[:5]])
        b.clear()
        b.use_near(default)
        with pytest.raises(StoreError, match=r"DEDUP_NEAR_THRESHOLD from 0\.708 to 1\.000"):
            a.match_near(low, low.fingerprint(pairs[5][0]))
    finally:
        b.clear()
        a.close()
        b.close()


def test_a_reset_with_the_same_settings_leaves_running_workers_going(
    redis_url: str, pairs: Pairs
) -> None:
    """B resets with A's settings; A keeps a text before B claims again: A
    claims its own layout (the one B needs), and both go on, neither refused."""
    namespace = f"layout-{uuid.uuid4().hex[:10]}"
    low = MinHashMethod(0.5)
    a = open_store(redis_url, namespace, prefix=PREFIX)
    b = open_store(redis_url, namespace, prefix=PREFIX)
    c = None
    try:
        a.use_near(low)
        b.clear()
        urls = _keep(a, low, [x for x, _, _ in pairs[:20]])
        assert _index_field(redis_url, namespace) == b"minhash2-035x003"
        b.use_near(low)
        assert _found(b, low, pairs[:20], urls) >= 0.97
        # An unclaimed namespace whose band keys are in a suffixed index is
        # claimed for that index, not taken for the default one.
        _index_field(redis_url, namespace, None)
        c = open_store(redis_url, namespace, prefix=PREFIX)
        with pytest.raises(StoreError, match=r"DEDUP_NEAR_THRESHOLD from 0\.500 to 0\.502"):
            c.use_near(MinHashMethod(0.75))
    finally:
        b.clear()
        for store in (a, b, c):
            if store is not None:
                store.close()


def test_sqlite_says_when_texts_of_an_earlier_minhash_cannot_be_compared(
    tmp_path: Path, pairs: Pairs, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    store = SqliteStore(tmp_path / "dedup.db", "old")
    urls = _keep(store, MinHashMethod(0.75), [a for a, _, _ in pairs[:5]])
    store.close()
    with sqlite3.connect(tmp_path / "dedup.db") as db:  # as an earlier version wrote it
        db.execute("INSERT INTO near SELECT ns, 'minhash', zeroblob(512), url FROM near")
    store = SqliteStore(tmp_path / "dedup.db", "old")
    try:
        method = MinHashMethod(0.75)
        with caplog.at_level(logging.WARNING):
            for text, url in urls.items():  # this version's texts are found as before
                match = store.match_near(method, method.fingerprint(text))
                assert match is not None and match[0] == url
        assert caplog.text.count("5 near-duplicate texts kept by an earlier") == 1
    finally:
        store.close()
