"""Every store behind the one interface: memory, SQLite, Redis and a Redis Cluster.

The Redis stores run against real servers (see conftest: ``redis_url`` and
``redis_cluster_url``); SQLite against a real file.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from scrapy_dedup.keys import PREVIOUS_RUN
from scrapy_dedup.stores import (
    DedupStore,
    MemoryStore,
    SqliteStore,
    StoreError,
    open_store,
)
from scrapy_dedup.text.near import MinHashMethod, NearMethod, SimhashMethod
from tests.text.neardup_corpus import labelled_pairs

StoreFactory = Callable[[], DedupStore]

TEXT = (
    "The quarterly report shows that revenue grew by twelve percent while costs stayed flat, "
    "which the board attributes to the new distribution agreements signed in the spring and "
    "to lower shipping prices across the northern region during the summer months"
)
EDITED = TEXT.replace("twelve", "eleven")
OTHER = (
    "Instructions for assembling the garden shed: lay the base on level ground, fix the four "
    "corner posts with the supplied brackets, then attach the wall panels starting from the "
    "back and finish with the roof sheets, overlapping each by at least ten centimetres"
)


@pytest.fixture(params=["memory", "sqlite", "redis", "cluster"])
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], DedupStore]]:
    """A factory of stores sharing one namespace (several "workers")."""
    namespace = f"test-{uuid.uuid4().hex[:10]}"
    opened: list[DedupStore] = []
    if request.param == "memory":
        shared = MemoryStore()

        def factory() -> DedupStore:
            return shared
    elif request.param == "sqlite":

        def factory() -> DedupStore:
            # One process per namespace: the "workers" share one store object.
            if not opened:
                opened.append(SqliteStore(tmp_path / "dedup.db", namespace))
            return opened[0]
    else:
        url = request.getfixturevalue(
            "redis_url" if request.param == "redis" else "redis_cluster_url"
        )

        def factory() -> DedupStore:
            store = open_store(url, namespace, prefix="scrapy-dedup-test")
            opened.append(store)
            return store

    yield factory
    if opened:
        opened[0].clear()
    for store in opened:
        store.close()


def test_the_first_url_key_wins(make_store: StoreFactory) -> None:
    store = make_store()
    assert store.add_url(1, 10) is None
    assert store.add_url(1, 11) == 10
    assert store.get_url(1) == 10
    assert store.get_url(2) is None
    big = (1 << 64) - 1  # keys are unsigned 64-bit
    assert store.add_url(big, 7) is None
    assert store.add_url(big, 8) == 7
    other = make_store()  # another worker sees the same state
    assert other.add_url(1, 12) == 10
    assert other.get_url(big) == 7


def test_the_first_text_wins(make_store: StoreFactory) -> None:
    store = make_store()
    digest = bytes(range(16))
    assert store.get_content(digest) is None
    assert store.add_content(digest, "https://a.test/1") is None
    assert make_store().add_content(digest, "https://a.test/2") == "https://a.test/1"
    assert store.get_content(digest) == "https://a.test/1"


@pytest.mark.parametrize("method", [MinHashMethod(), SimhashMethod(max_distance=3)])
def test_near_duplicates_name_the_kept_url(make_store: StoreFactory, method: NearMethod) -> None:
    pair = next(p for p in labelled_pairs(per_kind=20) if p.kind == "word_swap_0.5pct")
    assert method.match(method.fingerprint(pair.a), method.fingerprint(pair.b)) is not None
    store = make_store()
    assert (
        store.match_or_add_near(method, method.fingerprint(pair.a), "https://a.test/kept") is None
    )
    assert (
        store.match_or_add_near(method, method.fingerprint(OTHER), "https://a.test/other") is None
    )
    found = make_store().match_or_add_near(
        method, method.fingerprint(pair.b), "https://a.test/copy"
    )
    assert found is not None and found[0] == "https://a.test/kept"
    # The very same text again is a near duplicate of the first, not a new document.
    again = store.match_or_add_near(method, method.fingerprint(pair.a), "https://a.test/again")
    assert again is not None and again[0] == "https://a.test/kept"


def test_near_duplicates_name_their_kept_url_when_texts_and_fingerprints_interleave(
    make_store: StoreFactory,
) -> None:
    """As the pipeline keeps items: a text's digest, then its fingerprint under
    the same URL; but some texts have no fingerprint, and some fingerprints
    come without a digest (another URL, a written-back outage). The memory
    store names the digests' copy of a URL instead of storing it twice; every
    match must still name the URL its text was kept under."""
    method = MinHashMethod()
    pairs = [p for p in labelled_pairs(per_kind=20) if p.kind == "word_swap_0.5pct"][:12]
    store = make_store()
    kept = {}
    for n, pair in enumerate(pairs):
        url = f"https://a.test/kept/{n}"
        kept[pair.b] = url
        if n % 3 != 2:
            assert store.add_content(bytes([n]) * 16, url) is None
        if n % 4 == 1:  # a text without a fingerprint: the positions part ways
            assert store.add_content(bytes([100 + n]) * 16, f"https://a.test/short/{n}") is None
        fingerprinted = url if n % 5 != 4 else f"https://a.test/alias/{n}"
        kept[pair.b] = fingerprinted
        store.add_near(method, method.fingerprint(pair.a), fingerprinted)
    for pair in pairs:
        found = make_store().match_near(method, method.fingerprint(pair.b))
        assert found is not None and found[0] == kept[pair.b]


def test_filed_fingerprints_are_kept_in_order_up_to_a_limit(make_store: StoreFactory) -> None:
    store = make_store()
    method = MinHashMethod()
    blobs = [method.encode(method.fingerprint(f"{TEXT} {i}")) for i in range(40)]
    added = [store.add_filed(99, blob) for blob in blobs]
    assert added[:32] == [True] * 32 and not any(added[32:])
    assert make_store().filed(99) == blobs[:32]
    assert store.filed(98) == []


def test_clear_forgets_the_namespace(make_store: StoreFactory) -> None:
    store = make_store()
    store.add_url(5, 1)
    store.add_content(b"x" * 16, "https://a.test/")
    assert store.claim(5, 77) is None
    store.clear(urls_only=True)  # what scrapy-redis's flush asks for: texts stay
    assert store.get_url(5) is None
    assert store.get_content(b"x" * 16) == "https://a.test/"
    assert store.claim(5, 78) == 77  # rel=canonical claims are not URL keys
    store.add_url(5, 1)
    store.clear()
    assert store.get_url(5) is None
    assert store.add_content(b"x" * 16, "https://a.test/b") is None
    assert store.claim(5, 78) is None


def test_canonical_claims_live_apart_from_url_keys(make_store: StoreFactory) -> None:
    store = make_store()
    big = (1 << 64) - 1
    assert store.claim(big, 1 << 47) is None
    assert make_store().claim(big, 5) == 1 << 47  # the first page filed there wins
    assert store.get_url(big) is None and store.add_url(big, 9) is None


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_clearing_a_namespace_spares_its_lookalikes(
    request: pytest.FixtureRequest, kind: str
) -> None:
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    tag = uuid.uuid4().hex[:8]
    names = [f"shop{tag}", f"shop{tag}:2026", f"sh[o]p{tag}", f"shop{tag}*"]
    stores = [open_store(url, name, prefix="scrapy-dedup-test") for name in names]
    try:
        for store in stores:
            store.add_url(1, 1)
            store.add_content(b"y" * 16, "https://a.test/")
        stores[0].clear()
        stores[2].clear()
        survivors = [open_store(url, name, prefix="scrapy-dedup-test") for name in names]
        assert [s.get_url(1) for s in survivors] == [None, 1, None, 1]
        assert [s.get_content(b"y" * 16) for s in survivors][1::2] == ["https://a.test/"] * 2
        for store in survivors:
            store.close()
    finally:
        for store in stores:
            store.clear()
            store.close()


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_racing_workers_each_key_is_won_once(request: pytest.FixtureRequest, kind: str) -> None:
    """Eight workers with their own connections record the same 400 URL keys
    and texts at once: every key is new to exactly one of them."""
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    namespace = f"race-{uuid.uuid4().hex[:10]}"
    stores = [open_store(url, namespace, prefix="scrapy-dedup-test") for _ in range(8)]
    wins: list[list[int]] = [[] for _ in stores]
    text_wins: list[list[int]] = [[] for _ in stores]
    barrier = threading.Barrier(len(stores))

    def work(n: int) -> None:
        store = stores[n]
        barrier.wait()
        for key in range(400):
            if store.add_url(key * 0x9E3779B97F4A7C15 % (1 << 64), n) is None:
                wins[n].append(key)
            if store.add_content(key.to_bytes(16, "little"), f"https://a.test/{n}") is None:
                text_wins[n].append(key)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sorted(k for won in wins for k in won) == list(range(400))
        assert sorted(k for won in text_wins for k in won) == list(range(400))
        assert sum(1 for won in wins if won) > 1  # they did race
    finally:
        stores[0].clear()
        for store in stores:
            store.close()


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_racing_workers_read_one_evidence_log_in_one_order(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """Four workers append learned-rule evidence at once, each reading the
    log as it goes: in the end each has read every record, in the same order."""
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    namespace = f"log-{uuid.uuid4().hex[:10]}"
    stores = [open_store(url, namespace, prefix="scrapy-dedup-test") for _ in range(4)]
    seen: list[list[str]] = [[] for _ in stores]
    barrier = threading.Barrier(len(stores))

    positions = [0] * len(stores)

    def work(n: int) -> None:
        store = stores[n]
        barrier.wait()
        for i in range(200):
            found, positions[n] = store.exchange_evidence([f"{n}:{i}:é"], positions[n])
            assert f"{n}:{i}:é" in found  # its own record comes back, in its place
            seen[n] += found

    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for n, store in enumerate(stores):  # what the others appended after its last record
        seen[n] += store.exchange_evidence([], positions[n])[0]
    try:
        assert len(seen[0]) == 800 and all(log == seen[0] for log in seen)
        assert len({record[0] for record in seen[0][:100]}) > 1  # they did race
        # A worker that joins later (or the next run) reads it all first.
        late = open_store(url, namespace, prefix="scrapy-dedup-test")
        assert late.exchange_evidence(["late"], 0) == ([*seen[0], "late"], 801)
        late.clear()
        assert late.exchange_evidence([], 0) == ([], 0)
        late.close()
    finally:
        for store in stores:
            store.close()


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_a_worker_reads_an_evidence_log_that_lost_records_again_from_the_start(
    request: pytest.FixtureRequest, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Positions are list indexes: after the list lost records (a DEL, an
    LTRIM, a failover to a replica that missed them) and grew again past the
    old position, reading on from there would skip the new records."""
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    namespace = f"log-{uuid.uuid4().hex[:10]}"
    store = open_store(url, namespace, prefix="scrapy-dedup-test")
    client = store.client  # type: ignore[attr-defined]
    name = f"scrapy-dedup-test:{namespace}:learn"
    try:
        found, at = store.exchange_evidence(["a", "b", "c"], 0)
        assert (found, at) == (["a", "b", "c"], 3)
        assert store.exchange_evidence([], at) == ([], 3)  # nothing new: nothing read
        client.delete(name)  # ...then another worker appends four records
        client.rpush(name, "w", "x", "y", "z")
        with caplog.at_level("WARNING"):
            found, at = store.exchange_evidence(["d"], at)
        assert (found, at) == (["w", "x", "y", "z", "d"], 5)  # not ["z", "d"]
        assert "lost records this worker had read" in caplog.text
        client.ltrim(name, 0, 1)  # a failover that kept the first two...
        client.rpush(name, "p", "q", "r", "s")  # ...and four new ones
        found, at = store.exchange_evidence([], at)
        assert (found, at) == (["w", "x", "p", "q", "r", "s"], 6)
        caplog.clear()
        with caplog.at_level("WARNING"):  # a log that only grew is read on
            assert store.exchange_evidence(["t"], at) == (["t"], 7)
        assert not caplog.text
    finally:
        store.clear()
        store.close()


def test_sqlite_keeps_the_evidence_log_for_the_next_run(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "d.db", "ns")
    assert store.exchange_evidence(["a", "b"], 0) == (["a", "b"], 2)
    assert store.exchange_evidence(["c"], 2) == (["c"], 3)
    store.close()
    other = SqliteStore(tmp_path / "d.db", "other")  # namespaces have logs of their own
    assert other.exchange_evidence([], 0) == ([], 0)
    other.close()
    store = SqliteStore(tmp_path / "d.db", "ns")
    assert "3 pages of learned-rule evidence" in store.describe()
    assert store.exchange_evidence(["d"], 0) == (["a", "b", "c", "d"], 4)
    store.clear(urls_only=True)  # scrapy-redis's flush: the evidence stays
    store.close()
    store = SqliteStore(tmp_path / "d.db", "ns")
    assert store.exchange_evidence([], 0) == (["a", "b", "c", "d"], 4)
    store.clear()
    assert store.exchange_evidence([], 0) == ([], 0)
    store.close()


def test_the_memory_store_keeps_no_evidence_log() -> None:
    # One process: it learns from its own pages, applied as it hands them in.
    assert MemoryStore().exchange_evidence(["a"], 0) == (["a"], 0)


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_racing_near_duplicates_never_lose_the_text(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """The near-duplicate lookup spans several bands (several cluster nodes), so
    it is not atomic: near duplicates recorded at the same moment may all be
    kept. What must hold: every group keeps at least one, and a dropped
    document always names a kept one."""
    url = request.getfixturevalue("redis_url" if kind == "redis" else "redis_cluster_url")
    namespace = f"near-race-{uuid.uuid4().hex[:10]}"
    method = MinHashMethod()
    pairs = [p for p in labelled_pairs(per_kind=20) if p.kind == "word_swap_0.5pct"]
    assert len(pairs) == 20
    workers = 4
    stores = [open_store(url, namespace, prefix="scrapy-dedup-test") for _ in range(workers)]
    kept: set[str] = set()
    named: dict[str, str] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(workers)

    def work(n: int) -> None:
        barrier.wait()
        for g, pair in enumerate(pairs):
            text = pair.a if n % 2 == 0 else pair.b  # each group: two texts, four workers
            doc = f"https://a.test/{g}/{n}"
            found = stores[n].match_or_add_near(method, method.fingerprint(text), doc)
            with lock:
                if found is None:
                    kept.add(doc)
                else:
                    named[doc] = found[0]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        # Every document is kept or names a kept one (a group may name another
        # group's document: two corpus texts can be near duplicates themselves).
        assert set(named.values()) <= kept
        assert len(kept) + len(named) == workers * len(pairs)
        assert named  # most were still caught
    finally:
        stores[0].clear()
        for store in stores:
            store.close()


# -- SQLite ------------------------------------------------------------------


def test_sqlite_persists_kept_pages_and_texts_not_every_key(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    store = SqliteStore(path, "shop")
    method = MinHashMethod()
    store.add_url(1, 100)  # only seen: the next run fetches it again
    store.keep_url(2, 200)  # its items were kept
    with store.hold() as held:
        store.add_content(b"k" * 16, "https://a.test/kept")
        store.match_or_add_near(method, method.fingerprint(TEXT), "https://a.test/kept")
        store.add_filed(7, b"sig")
    store.release(held)
    with store.hold() as lost:
        store.add_content(b"l" * 16, "https://a.test/lost")  # its item never got out
    store.discard(lost)
    store.close()

    again = SqliteStore(path, "shop")
    assert again.get_url(1) is None
    assert again.get_url(2) == 200 | PREVIOUS_RUN
    assert again.get_content(b"k" * 16) == "https://a.test/kept"
    assert again.get_content(b"l" * 16) is None
    found = again.match_or_add_near(method, method.fingerprint(EDITED), "https://a.test/copy")
    assert found is not None and found[0] == "https://a.test/kept"
    assert again.filed(7) == [b"sig"]
    again.close()
    other = SqliteStore(path, "blog")  # namespaces share the file, not the state
    assert other.get_url(2) is None and other.get_content(b"k" * 16) is None
    other.close()


def test_sqlite_commits_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    store = SqliteStore(path, "ns", persist="seen", batch=100, interval=3600)
    for key in range(250):
        store.add_url(key, 1)
    # A reader sees whole batches only: what a kill -9 now would leave.
    with sqlite3.connect(path) as reader:
        assert reader.execute("SELECT COUNT(*) FROM urls").fetchone()[0] == 200
    reader.close()
    store.close()
    with sqlite3.connect(path) as reader:
        assert reader.execute("SELECT COUNT(*) FROM urls").fetchone()[0] == 250
    reader.close()


def test_sqlite_one_process_per_namespace(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    first = SqliteStore(path, "shop")
    # The lock is per process; a second open in this process is refused the
    # same way only on another file descriptor's lock, so check through a child.
    import subprocess
    import sys

    code = (
        "import sys\nfrom scrapy_dedup.stores import SqliteStore, StoreError\n"
        "try:\n    SqliteStore(sys.argv[1], sys.argv[2]).close()\n"
        "except StoreError as e:\n    print('REFUSED', e)\nelse:\n    print('OPENED')\n"
    )
    busy = subprocess.run(
        [sys.executable, "-c", code, str(path), "shop"], capture_output=True, text=True, check=True
    )
    free = subprocess.run(
        [sys.executable, "-c", code, str(path), "blog"], capture_output=True, text=True, check=True
    )
    # Within this process too, and closing another namespace frees nothing.
    other = SqliteStore(path, "blog")
    with pytest.raises(StoreError, match="in use"):
        SqliteStore(path, "shop")
    other.close()
    with pytest.raises(StoreError, match="in use"):
        SqliteStore(path, "shop")
    first.close()
    SqliteStore(path, "shop").close()  # free once closed
    assert busy.stdout.startswith("REFUSED") and "in use by another process" in busy.stdout
    assert free.stdout.startswith("OPENED")


def test_a_corrupt_sqlite_file_is_a_clear_error_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    store = SqliteStore(path, "shop", persist="seen")
    for key in range(5000):
        store.add_url(key, 1)
    store.close()
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = b"\xff" * 4096  # a damaged page
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"dedup\.db") as info:
        SqliteStore(path, "shop")
    assert "nothing was changed" in str(info.value)
    assert path.read_bytes() == bytes(data)

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match=r"garbage\.db"):
        SqliteStore(garbage, "shop")
    assert garbage.read_bytes() == b"this is not a database at all" * 100


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO users (name) VALUES ('ada')")
    db.close()
    with pytest.raises(StoreError, match=r"something else .*users"):
        open_store(f"sqlite:///{path}", "shop")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM users").fetchall() == [("ada",)]
        assert db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 1
    db.close()


def test_store_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert type(open_store("memory", "x")) is MemoryStore
    jobdir = open_store("memory", "x", jobdir=str(tmp_path / "job"))
    assert isinstance(jobdir, SqliteStore) and not jobdir.persists_kept
    jobdir.close()
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///data/dedup.db", "x")
    assert isinstance(relative, SqliteStore) and relative.persists_kept
    relative.close()
    assert (tmp_path / "data" / "dedup.db").exists()
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db", "x")  # sqlite:////tmp/...
    absolute.close()
    assert (tmp_path / "abs.db").exists()
    escaped = open_store("sqlite:///a%23b%3F.db", "x")  # "#" and "?" written as escapes
    escaped.close()
    assert (tmp_path / "a#b?.db").exists()
    for bad in (
        "sqlite://",
        "postgres://db/x",
        "mem",
        "sqlite:///a#b.db",
        "sqlite:///a.db?mode=ro",
        "sqlite:///:memory:",
        "redis://",
        "redis+cluster://",
    ):
        with pytest.raises(ValueError, match="DEDUP_STORE"):
            open_store(bad, "x")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["a#b?.db", "abs.db"]


class TaggedStore(MemoryStore):
    """A third-party store: one class named by its URI scheme."""

    opened: ClassVar[list[str]] = []

    @classmethod
    def from_uri(
        cls, uri: str, namespace: str, *, jobdir: str | None = None, prefix: str = "dedup"
    ) -> TaggedStore:
        cls.opened.append(f"{uri} {namespace}")
        return cls()


def test_a_store_of_ones_own_is_one_class_path() -> None:
    classes = {"tagged": "tests.stores.test_stores.TaggedStore"}
    store = open_store("tagged://anything", "ns", classes=classes)
    assert type(store) is TaggedStore and TaggedStore.opened[-1] == "tagged://anything ns"
    with pytest.raises(ValueError, match="not a DedupStore class"):
        open_store("x://", "ns", classes={"x": "pathlib.Path"})


def test_a_schema_1_file_gains_the_claims_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SqliteStore(path, "ns", persist="seen").close()
    with sqlite3.connect(path) as db:  # as scrapy-dedup 0.1 wrote it
        db.execute("DROP TABLE claims")
        db.execute("PRAGMA user_version=1")
    db.close()
    store = SqliteStore(path, "ns", persist="seen")
    assert store.claim(3, 30) is None
    store.close()
    store = SqliteStore(path, "ns", persist="seen")
    assert store.claim(3, 31) == 30
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4
    db.close()


def test_unreachable_redis_names_the_uri_without_its_password() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError, match=f"127.0.0.1:{port}") as info:
        open_store(f"redis://:hunter2@127.0.0.1:{port}/0", "x")
    assert "hunter2" not in str(info.value)
