"""Runs: what a store keeps for later runs, and what it forgets, without a
crawl (the crawls are in tests/test_persistence.py)."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
import redis

from scrapy_dedup.keys import PREVIOUS_RUN
from scrapy_dedup.stores import DedupStore, SqliteStore
from scrapy_dedup.stores.redis import RedisStore

Opener = Callable[..., DedupStore]


@pytest.fixture(params=["sqlite", "redis"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the same namespace again, as a later run would."""
    if request.param == "sqlite":
        yield lambda **kw: SqliteStore(tmp_path / "d.db", "ns", **kw)
        return
    url = request.getfixturevalue("redis_url")
    prefix = f"scrapy-dedup-test:{uuid.uuid4().hex[:12]}"
    yield lambda **kw: RedisStore.from_uri(url, "ns", prefix=prefix, **kw)
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_a_later_run_knows_kept_pages_only(open_store: Opener) -> None:
    store = open_store()
    assert store.add_url(1, 10) is None  # seen, gave no item
    assert store.add_url(2, 20) is None
    store.keep_url(2, 20, "https://a.test/2")  # gave an item
    assert store.add_url(2, 21) == 20  # within the run: a plain duplicate
    store.add_pending(3, '{"url": "https://a.test/3"}')
    store.close()

    store = open_store()
    assert store.add_url(1, 11) is None  # fetched again: it gave no item
    assert store.add_url(2, 22) == 20 | PREVIOUS_RUN
    assert store.pending_requests() == [(3, '{"url": "https://a.test/3"}')]
    assert store.describe()  # one line for the log
    store.close()


def test_pending_rows_leave_only_when_done(open_store: Opener) -> None:
    store = open_store()
    store.add_pending(1, "one")
    store.add_pending(2, "two")
    store.flush()
    store.done_pending(1)
    store.close()
    store = open_store()
    assert store.pending_requests() == [(2, "two")]
    store.close()


def test_recrawl_after_lets_old_pages_through_once(open_store: Opener) -> None:
    store = open_store()
    store.add_url(5, 50)
    store.keep_url(5, 50, "https://a.test/5")
    store.close()
    time.sleep(2.1)  # times are kept to the second
    store = open_store(recrawl_after=1)
    assert store.add_url(5, 51) is None
    assert store.expired(5)
    assert not store.expired(6)
    store.keep_url(5, 51, "https://a.test/5")  # kept again: skipped from now on
    store.close()
    store = open_store(recrawl_after=1)
    assert store.add_url(5, 52) == 51 | PREVIOUS_RUN
    store.close()


def test_forget_by_key_and_prefix(open_store: Opener) -> None:
    store = open_store()
    for key, url in [
        (1, "https://a.test/x/1"),
        (2, "https://a.test/x/2"),
        (3, "https://a.test/y"),
    ]:
        store.add_url(key, key)
        store.keep_url(key, key, url)
        store.add_content(bytes([key]) * 16, url)  # Redis finds prefixes through texts
    store.close()
    keys = {"https://a.test/x/1": 1, "https://a.test/x/2": 2, "https://a.test/y": 3}
    store = open_store()
    forgotten = store.forget([3], prefix="https://a.test/x/", key_of=keys.__getitem__)
    assert len(forgotten) == 3
    assert {"https://a.test/x/1", "https://a.test/x/2"} <= set(forgotten)
    assert store.forget([3]) == []  # gone already
    store.close()
    store = open_store()
    assert [store.add_url(key, 0) for key in (1, 2, 3)] == [None, None, None]
    store.close()


def test_redis_workers_of_one_run_share_seen_keys_and_a_new_run_does_not(
    redis_url: str,
) -> None:
    prefix = f"scrapy-dedup-test:{uuid.uuid4().hex[:12]}"
    first = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
    second = RedisStore.from_uri(redis_url, "ns", prefix=prefix)  # joins while first is up
    assert first.new_run and not second.new_run
    assert first.run == second.run
    assert first.add_url(7, 70) is None
    assert second.add_url(7, 71) == 70
    assert second.pending_requests() == []  # only the worker that starts a run resumes
    first.close()
    second.close()
    third = RedisStore.from_uri(redis_url, "ns", prefix=prefix)  # alone: a new run
    assert third.new_run and third.run == first.run + 1
    assert third.add_url(7, 72) is None
    third.clear()
    third.close()


def test_redis_text_claims_of_a_killed_worker_count_for_nothing_next_run(redis_url: str) -> None:
    prefix = f"scrapy-dedup-test:{uuid.uuid4().hex[:12]}"
    worker = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
    with worker.hold() as held:  # the item is in the pipelines...
        assert worker.add_content(b"d" * 16, "https://a.test/1") is None
    other = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
    assert other.add_content(b"d" * 16, "https://a.test/2") == "https://a.test/1"  # this run
    worker.client.connection_pool.disconnect()  # ... and the worker dies before it is out
    other.close()
    later = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
    assert later.new_run
    assert later.get_content(b"d" * 16) is None
    assert later.add_content(b"d" * 16, "https://a.test/1") is None
    # Confirmed texts count for every later run; discarded ones for none.
    with later.hold() as held:
        later.add_content(b"e" * 16, "https://a.test/3")
        later.add_content(b"f" * 16, "https://a.test/4")
    later.release(held[:1])
    later.discard(held[1:])
    later.close()
    last = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
    assert last.get_content(b"e" * 16) == "https://a.test/3"
    assert last.get_content(b"f" * 16) is None
    last.clear()
    last.close()


def test_a_version_2_sqlite_file_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(
            """
            PRAGMA application_id=1396987216;
            PRAGMA user_version=2;
            CREATE TABLE namespaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
            CREATE TABLE urls (ns INTEGER NOT NULL, key INTEGER NOT NULL,
                info INTEGER NOT NULL, PRIMARY KEY (ns, key)) WITHOUT ROWID;
            INSERT INTO namespaces VALUES (1, 'ns');
            INSERT INTO urls VALUES (1, 9, 90);
            """
        )
    store = SqliteStore(path, "ns", recrawl_after=3600)
    # A page kept before times were kept counts as old: fetched again once.
    assert store.add_url(9, 91) is None and store.expired(9)
    store.keep_url(9, 90, "https://a.test/9")
    store.close()
    store = SqliteStore(path, "ns", recrawl_after=3600)
    assert store.add_url(9, 92) == 91 | PREVIOUS_RUN  # the info of this run's request
    store.close()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4
        assert db.execute("SELECT url FROM urls").fetchall() == [("https://a.test/9",)]


def test_the_last_frontier_call_for_a_key_wins_within_a_batch(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "d.db", "ns")
    store.add_pending(1, "one")
    store.flush()
    store.flush_due = lambda: None  # a crawl: one batch for the turn
    store.done_pending(1)  # given up...
    store.add_pending(1, "one, linked again")  # ... and scheduled again in the same batch
    store.add_pending(2, "two")
    store.done_pending(2)
    store.close()
    store = SqliteStore(tmp_path / "d.db", "ns")
    assert store.pending_requests() == [(1, "one, linked again")]
    store.close()


def test_a_dropped_connection_does_not_lose_a_redis_frontier_write(redis_url: str) -> None:
    prefix = f"scrapy-dedup-test:{uuid.uuid4().hex[:12]}"
    store = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
    store.flush_due = lambda: None  # a crawl: written at the end of the turn
    store.add_pending(1, "one")
    store.add_url(2, 20)
    store.keep_url(2, 20, "https://a.test/2")
    killer = redis.Redis.from_url(redis_url)
    assert killer.client_kill_filter(_id=None, skipme=True, laddr=None, _type="normal") >= 1
    killer.close()
    store.flush()  # the first try meets a closed connection: tried again, in full
    store.client.connection_pool.disconnect()  # gone, as if killed
    later = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
    assert later.new_run
    assert later.pending_requests() == [(1, "one")]
    assert later.add_url(2, 21) == 20 | PREVIOUS_RUN
    later.clear()
    later.close()


def test_redis_workers_starting_together_join_one_run(redis_url: str) -> None:
    import threading

    prefix = f"scrapy-dedup-test:{uuid.uuid4().hex[:12]}"
    stores: list[RedisStore] = []
    lock = threading.Lock()

    def start() -> None:
        store = RedisStore.from_uri(redis_url, "ns", prefix=prefix)
        with lock:
            stores.append(store)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({store.run for store in stores}) == 1
    assert sum(store.new_run for store in stores) == 1
    stores[0].clear()
    for store in stores:
        store.close()


def test_texts_of_an_earlier_normalization_are_announced_once(
    open_store: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    """A namespace whose texts were recorded before the text normalization
    was versioned says so at the next start, then never again."""
    store = open_store()
    with store.hold() as held:
        assert store.add_content(b"d" * 16, "https://a.test/1") is None
    store.release(held)
    store.close()
    store = open_store()
    store.close()
    assert "earlier text normalization" not in caplog.text  # recorded with this one

    if isinstance(store, SqliteStore):  # as an earlier version left it
        with closing(sqlite3.connect(store.path)) as db, db:
            db.execute("DELETE FROM text_version")
    else:
        store.client.hdel(f"{store.base}:run", "text_version")  # type: ignore[attr-defined]
    store = open_store()
    store.close()
    assert caplog.text.count("earlier text normalization (version 1, now 2") == 1
    store = open_store()
    store.close()
    assert caplog.text.count("earlier text normalization") == 1
