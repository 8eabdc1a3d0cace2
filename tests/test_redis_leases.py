"""Redis workers hold leases: the frontier rows of a worker killed while the
others crawl are adopted by a live worker within the run, at most once. Real
redis-server, real worker processes, kill -9 by PID."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from scrapy_dedup.stores.redis import RedisStore
from tests.crawl_worker import read_items
from tests.site import Route, Site, article, page
from tests.test_store_crawls import ADDON, _worker

LISTS, PER_LIST = 10, 12


def _lists_site(delay: float) -> tuple[dict[str, Route], dict[str, str]]:
    """120 slow article pages, 12 behind each of 10 list pages, each with a
    text of its own; returns the routes and article path -> content name."""
    from tests.text.neardup_corpus import documents

    texts = documents(min_words=60, max_words=200, seed=11)
    routes: dict[str, Route] = {}
    content: dict[str, str] = {}
    for n in range(1, LISTS + 1):
        links = []
        for m in range(1, PER_LIST + 1):
            path = f"/a/{n}-{m}"
            name = content[path] = f"doc{(n - 1) * PER_LIST + m}"
            body = texts[(n - 1) * PER_LIST + m]
            links.append(path)
            routes[path] = lambda q, body=body, name=name: (
                time.sleep(delay),
                article(f"Story {name}", body, "/"),
            )[1]
        routes[f"/list/{n}"] = lambda q, n=n, links=tuple(links): (
            time.sleep(delay),
            page(f"List {n}", *links),
        )[1]
    routes["/"] = lambda q: page("News")  # the lists are the seeds
    return routes, content


def _items(path: Path) -> list[dict[str, Any]]:
    return read_items(path)


def _workers_connected(url: str, count: int) -> bool:
    client = redis.Redis.from_url(url)
    try:
        names = {entry.get("name", "") for entry in client.client_list()}
    finally:
        client.close()
    return sum(1 for name in names if name.startswith("dedup-")) >= count


@pytest.mark.parametrize("queue", ["own", "scrapy-redis"])
@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")
def test_a_worker_killed_mid_crawl_loses_nothing_the_others_adopt_its_frontier(
    fresh_site: Site, redis_url: str, redis_prefix: str, tmp_path: Path, queue: str
) -> None:
    routes, content = _lists_site(delay=0.15)
    fresh_site.routes.update(routes)
    settings = {
        **ADDON,
        "DEDUP_STORE": redis_url,
        "DEDUP_NAMESPACE": f"leases-{uuid.uuid4().hex[:8]}",
        "DEDUP_REDIS_PREFIX": redis_prefix,
        "DEDUP_REDIS_LEASE": 2,
        "CONCURRENT_REQUESTS": 2,
        # Stay up until well after the kill: without adoption, a worker that
        # has nothing left waits here, and the pages of the killed one are lost.
        "WORKER_MIN_SECONDS": 6,
    }
    lists = [fresh_site.url(f"/list/{n}", host="127.0.0.1") for n in range(1, LISTS + 1)]
    if queue == "own":
        # Each worker its own queue (Scrapy's scheduler), seeded with its share of the lists.
        starts = [",".join(lists[n::3]) for n in range(3)]
    else:
        # One queue in Redis: the killed worker loses the requests in its hands.
        settings |= {
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "REDIS_URL": redis_url,
            "SCHEDULER_QUEUE_KEY": f"{redis_prefix}:%(spider)s:requests",
            "SCHEDULER_PERSIST": True,
            "SCHEDULER_IDLE_BEFORE_CLOSE": 0,
        }
        starts = [",".join(lists)] * 3
    files = [tmp_path / f"items-{n}.jsonl" for n in range(3)]
    procs = [_worker(settings, start, f) for start, f in zip(starts, files, strict=True)]
    # Each worker records its items as they come: kill the busiest one, once
    # all three are in the run and it has kept a few pages (most are still to come).
    deadline = time.monotonic() + 90
    victim = None
    while time.monotonic() < deadline and all(p.poll() is None for p in procs):
        counts = [len(_items(f)) for f in files]
        if max(counts) >= 6 and _workers_connected(redis_url, 3):
            victim = counts.index(max(counts))
            break
        time.sleep(0.02)
    assert victim is not None, "no worker got far enough to be killed"
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].communicate(timeout=30)
    assert procs[victim].returncode == -signal.SIGKILL
    killed_with = len(_items(files[victim]))
    assert killed_with < len(content) - 20, "the crawl was nearly done at the kill"

    logs = {}
    for n, proc in enumerate(procs):
        if n != victim:
            logs[n] = proc.communicate(timeout=180)[0]
            assert proc.returncode == 0, logs[n]

    items = [item for f in files for item in _items(f)]
    paths = [item["url"].split("//", 1)[1].split("/", 1)[1] for item in items]
    names = [content["/" + path] for path in paths]
    # Every real page gave exactly one item, across the killed worker (what it
    # wrote before the kill) and the two survivors: nothing lost, nothing doubled.
    missing = sorted(set(content.values()) - set(names))
    doubled = sorted(name for name in set(names) if names.count(name) > 1)
    assert (missing, doubled) == ([], []), (
        f"{len(missing)} pages lost, {len(doubled)} doubled (killed worker had "
        f"{killed_with} items)\n" + "\n".join(logs.values())
    )
    # A survivor adopted the killed worker's unfinished requests, and says so.
    assert any("Adopted" in log and "lease expired" in log for log in logs.values())
    assert any("'dedup/frontier/adopted'" in log for log in logs.values())


def _die(store: RedisStore) -> None:
    """Close every connection of ``store``, as a kill -9 of its process would
    (``RedisCluster.close`` leaves its nodes' connections open)."""
    if hasattr(store.client, "get_nodes"):
        for node in store.client.get_nodes():
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()
    store.client.close()


def _store(url: str, namespace: str, prefix: str, lease: float) -> RedisStore:
    store = RedisStore.from_uri(url, namespace, prefix=prefix, lease=lease)
    store.flush_due = None
    return store


@pytest.mark.parametrize("server", ["redis", "cluster"])
def test_two_live_workers_racing_adopt_a_dead_workers_rows_at_most_once(
    request: pytest.FixtureRequest, redis_prefix: str, server: str
) -> None:
    # On a cluster too: a run's lease keys share one hash slot, so one script moves the rows.
    redis_url = request.getfixturevalue("redis_url" if server == "redis" else "redis_cluster_url")
    namespace = f"race-{uuid.uuid4().hex[:8]}"
    dead = _store(redis_url, namespace, redis_prefix, lease=60)
    dead.keep_lease()
    rows = {key: f'{{"url": "https://a.test/{key}"}}' for key in range(1, 2001)}
    for key, text in rows.items():
        dead.add_pending(key << 40, text)
    dead.flush()
    alive = [_store(redis_url, namespace, redis_prefix, lease=30) for _ in range(2)]
    assert {store.run for store in alive} == {dead.run}  # all three in one run
    for store in alive:
        store.keep_lease()
    # Killed: its connections close; its lease holds for a minute.
    lease = dead._lease_key(dead.worker)
    _die(dead)
    assert not any(store.adopt() for store in alive)
    assert all(store.awaiting_adoption() for store in alive)
    # ...until it runs out (made to now, not in a minute).
    alive[0].client.pexpire(lease, 1)
    while alive[0].client.exists(lease):
        time.sleep(0.01)
    found: list[list[Any]] = [[], []]
    ready = threading.Barrier(2)

    def race(n: int) -> None:
        ready.wait()
        for _ in range(5):
            found[n] += alive[n].adopt()

    threads = [threading.Thread(target=race, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    adopted = [[key for adoption in got for key, _ in adoption.rows] for got in found]
    # Every row adopted once, by one of the two.
    assert sorted(adopted[0] + adopted[1]) == sorted(key << 40 for key in rows)
    assert not set(adopted[0]) & set(adopted[1])
    assert not any(store.awaiting_adoption() for store in alive)
    # The rows are the adopter's now: when it dies, the other one adopts them.
    winner = 0 if adopted[0] else 1
    alive[winner].release_lease()
    _die(alive[winner])
    taken = [key for adoption in alive[1 - winner].adopt() for key, _ in adoption.rows]
    assert sorted(taken) == sorted(adopted[winner])
    alive[1 - winner].close()


def _expire(store: RedisStore, alive: RedisStore) -> None:
    """Kill ``store`` and make its lease run out now."""
    lease = store._lease_key(store.worker)
    _die(store)
    alive.client.pexpire(lease, 1)
    while alive.client.exists(lease):
        time.sleep(0.01)


def test_whoever_adopts_an_adopter_learns_whom_it_had_taken_over(
    redis_url: str, redis_prefix: str
) -> None:
    # A dies; B adopts it and dies before it says so in the evidence log (the
    # "a" record that makes A's skips on trust B's); C adopts B. The store
    # tells C that B had taken A over, so that A's skips are C's to fetch.
    namespace = f"chain-{uuid.uuid4().hex[:8]}"
    a, b, c = (_store(redis_url, namespace, redis_prefix, lease=30) for _ in range(3))
    for store in (a, b, c):
        store.keep_lease()
    a.add_pending(1 << 40, '{"url": "https://a.test/1"}')
    a.flush()
    _expire(a, c)
    (by_b,) = b.adopt()
    assert (by_b.worker, [k for k, _ in by_b.rows], by_b.took) == (a.worker, [1 << 40], ())
    _expire(b, c)
    (by_c,) = c.adopt()
    assert (by_c.worker, [k for k, _ in by_c.rows], by_c.took) == (
        b.worker,
        [1 << 40],
        (a.worker,),
    )
    # A worker that left nothing is taken over too (what it skipped is owed).
    d = _store(redis_url, namespace, redis_prefix, lease=30)
    d.keep_lease()
    _expire(d, c)
    (by_c,) = c.adopt()
    assert (by_c.worker, by_c.rows, by_c.took) == (d.worker, [], ())
    assert c.adopt() == []
    c.close()


def test_an_adopted_page_s_link_seen_by_the_dead_worker_without_a_row_is_let_through_once(
    redis_url: str, redis_prefix: str
) -> None:
    namespace = f"links-{uuid.uuid4().hex[:8]}"
    dead = _store(redis_url, namespace, redis_prefix, lease=30)
    alive = _store(redis_url, namespace, redis_prefix, lease=30)
    lost, waiting, kept = 1 << 50, 2 << 50, 3 << 50
    # The worker that died saw three links: one it kept, one waiting in its
    # frontier, one whose row it never wrote (killed in that reactor turn).
    for key in (lost, waiting, kept):
        assert dead.add_url(key, 7) is None
    dead.add_pending(waiting, '{"url": "https://a.test/waiting"}')
    dead.keep_url(kept, 7)
    dead.flush()
    for key in (lost, waiting, kept):
        alive.readmit_link(key)
    assert alive.add_url(lost, 7) is None  # let through: it would be lost
    assert alive.add_url(lost, 7) == 7  # once
    assert alive.add_url(waiting, 7) == 7  # its row is adopted, crawled from there
    assert alive.add_url(kept, 7) == 7  # done for good
    dead.close()
    alive.close()


def test_a_text_claimed_by_a_worker_killed_before_its_item_came_out_is_taken_over(
    redis_url: str, redis_prefix: str
) -> None:
    namespace = f"claims-{uuid.uuid4().hex[:8]}"
    dead, alive = (_store(redis_url, namespace, redis_prefix, lease=60) for _ in range(2))
    other = _store(redis_url, namespace, redis_prefix, lease=60)
    for store in (dead, alive, other):
        store.keep_lease()
    page, text = "https://a.test/story", b"d" * 16
    with dead.hold():  # its item enters the pipelines: the text is claimed...
        assert dead.add_content(text, page) is None
    # ...while it lives, the claim holds: its item is on its way.
    assert other.get_content(text) == page
    with other.hold():
        assert other.add_content(text, "https://a.test/copy") == page
    # Killed before the item came out; its lease runs out, its page is adopted
    # and fetched again: the adopter's item is kept, not dropped for a claim
    # whose item never came out.
    lease = dead._lease_key(dead.worker)
    _die(dead)
    alive.client.pexpire(lease, 1)
    while alive.client.exists(lease):
        time.sleep(0.01)
    assert alive.get_content(text) is None
    with alive.hold() as held:
        assert alive.add_content(text, page) is None
    assert other.get_content(text) == page  # the adopter's claim, alive
    with other.hold():
        assert other.add_content(text, "https://a.test/copy") == page  # taken once
    alive.release(held)
    alive.flush()
    assert other.get_content(text) == page
    alive.close()
    other.close()


def _trust_site(site: Site, waiting: list[str]) -> dict[str, threading.Event]:
    """The teaser site (tests/test_relcanonical_crawl.py): articles 0-2 declare their
    clean pages rightly, the teasers of articles 3 on wrongly; each of ``waiting``
    (the start page of a worker that waits) is held until its gate is set, then
    links /s, whose teaser declares it: the page that ends the host's trust."""
    from tests.test_relcanonical_crawl import _teaser_routes

    site.routes.update(_teaser_routes(12, right=3))
    story_of_s, teaser_of_s = "a story of its own " * 30, "a teaser of it " * 20
    gates = {path: threading.Event() for path in waiting}
    for path, gate in gates.items():
        site.routes[path] = lambda q, gate=gate: (gate.wait(60), page("W", "/s"))[1]
    site.routes["/s"] = lambda q: article("S", story_of_s, "/s/teaser")
    site.routes["/s/teaser"] = lambda q: article(
        "S", teaser_of_s, extra_head='<link rel="canonical" href="/s">'
    )
    return gates


def _trust_settings(redis_url: str, redis_prefix: str) -> dict[str, Any]:
    return {
        **ADDON,
        "DEDUP_STORE": redis_url,
        "DEDUP_NAMESPACE": f"trust-{uuid.uuid4().hex[:8]}",
        "DEDUP_REDIS_PREFIX": redis_prefix,
        "DEDUP_REDIS_LEASE": 2,
        "DEDUP_CANONICAL_TRUST_SAMPLE": 0.0,
        "CONCURRENT_REQUESTS": 1,
        "DEPTH_PRIORITY": 1,  # breadth first: each article's views, then its clean page
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "WORKER_MIN_SECONDS": 6,
    }


def _assert_every_story_kept(files: list[Path], log: str) -> None:
    from tests.test_relcanonical_crawl import _teaser_routes

    routes = _teaser_routes(12, right=3)
    texts = [" ".join(item["text"].split()) for f in files for item in _items(f)]
    for n in range(12):
        story = " ".join(routes[f"/a/{n}"]("").body.split("<p>")[1].split("</p>")[0].split())
        assert any(text.endswith(story) for text in texts), (n, log)


def _waiting_worker(
    site: Site, redis_url: str, redis_prefix: str, tmp_path: Path, name: str
) -> tuple[threading.Event, dict[str, Any], list[Path], Any]:
    """The teaser site with a gate for worker ``name`` (started here, waiting
    at its start page): the gate, the settings, the item files (A's, then
    its) and its process."""
    gate = _trust_site(site, [f"/{name}"])[f"/{name}"]
    settings = _trust_settings(redis_url, redis_prefix)
    files = [tmp_path / "items-a.jsonl", tmp_path / f"items-{name}.jsonl"]
    worker = _worker(settings, site.url(f"/{name}", host="127.0.0.1"), files[1])
    return gate, settings, files, worker


def _killed_after_its_skips(
    site: Site, settings: dict[str, Any], redis_url: str, items: Path, others: list[Any]
) -> tuple[Any, set[str]]:
    """Worker A on the teaser site, started once the workers ``others`` are
    connected and killed once it has skipped stories on trust (it fetches the
    AMP view of article 7 after skipping stories 3-5): A's process and the
    stories it skipped."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _workers_connected(redis_url, len(others)):
        time.sleep(0.02)
    a = _worker(settings, site.url("/", host="127.0.0.1"), items)
    while time.monotonic() < deadline and "/a/7/amp" not in site.fetched():
        assert a.poll() is None and all(other.poll() is None for other in others)
        time.sleep(0.01)
    a.send_signal(signal.SIGKILL)
    a.communicate(timeout=30)
    skipped = {f"/a/{n}" for n in range(3, 6)} - set(site.fetched())
    assert skipped, site.fetched()
    return a, skipped


def _ends_the_trust_keeping_every_story(
    worker: Any, site: Site, skipped: set[str], files: list[Path]
) -> str:
    """``worker`` (the one that ends the host's trust) exits cleanly, has
    fetched the stories ``skipped`` on trust, and the items of ``files``
    hold every story: its log."""
    log = worker.communicate(timeout=120)[0]
    assert worker.returncode == 0, log
    assert "'dedup/canonical/revoked': 1" in log, log
    assert skipped <= set(site.fetched()), (sorted(skipped - set(site.fetched())), log)
    _assert_every_story_kept(files, log)
    return log


def test_what_a_killed_worker_skipped_on_trust_is_fetched_when_a_live_one_ends_the_trust(
    fresh_site: Site, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    # Worker A crawls the teaser site (tests/test_relcanonical_crawl.py):
    # articles 0-2 declare their clean pages rightly, so A trusts the host and
    # skips the stories the teasers of articles 3 on declare. Worker B, in the
    # same run, then finds a teaser wrong (/s, fetched, then its teaser view
    # declaring it) and stops trusting the host. A is killed after its skips:
    # when B adopts A's frontier, the stories A skipped on trust are B's to
    # fetch (nobody else would: their keys are seen), and every story gives
    # an item.
    gate, settings, files, b = _waiting_worker(fresh_site, redis_url, redis_prefix, tmp_path, "b")
    _, skipped = _killed_after_its_skips(fresh_site, settings, redis_url, files[0], [b])
    gate.set()
    log = _ends_the_trust_keeping_every_story(b, fresh_site, skipped, files)
    assert "Adopted" in log, log


def _log_records(url: str, prefix: str) -> list[list[Any]]:
    """The records of the evidence log of the one namespace under ``prefix``."""
    client = redis.Redis.from_url(url)
    try:
        keys = [k for k in client.scan_iter(f"{prefix}*:learn")]
        return [json.loads(r) for k in keys for r in client.lrange(k, 0, -1)]
    finally:
        client.close()


def test_skips_on_trust_pass_down_a_chain_of_adopters_that_die(
    fresh_site: Site, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    # As above, with three workers: A skips stories 3-5 on trust and is
    # killed; B and C wait on slow pages of their own, so both read A's skips
    # as they happen. One of them (the adopter) adopts A's frontier and is
    # killed in turn; the other adopts it and ends the trust (/s, then a
    # teaser of it declaring it): the stories A skipped are its to fetch. With
    # the adopter's skips passed on only when they were its own, nobody
    # fetched them.
    gates = _trust_site(fresh_site, ["/b", "/c"])
    settings = _trust_settings(redis_url, redis_prefix)
    files = {name: tmp_path / f"items-{name}.jsonl" for name in "abc"}
    waiting = {
        path: _worker(settings, fresh_site.url(path, host="127.0.0.1"), files[path[1]])
        for path in gates
    }
    others = list(waiting.values())
    _, skipped = _killed_after_its_skips(fresh_site, settings, redis_url, files["a"], others)
    deadline = time.monotonic() + 60
    # The adopter says so in the log; its "w" record names its process.
    adopter = None
    while adopter is None and time.monotonic() < deadline:
        records = _log_records(redis_url, redis_prefix)
        names = {r[1]: r[2] for r in records if r[0] == "w"}
        heirs = [names.get(r[1], "") for r in records if r[0] == "a"]
        for path, worker in waiting.items():
            if any(name.split("-")[2] == str(worker.pid) for name in heirs if name):
                adopter = path
        time.sleep(0.05)
    assert adopter is not None, "nobody adopted A's frontier"
    survivor = next(path for path in waiting if path != adopter)
    waiting[adopter].send_signal(signal.SIGKILL)
    waiting[adopter].communicate(timeout=30)
    for gate in gates.values():
        gate.set()
    log = _ends_the_trust_keeping_every_story(
        waiting[survivor], fresh_site, skipped, list(files.values())
    )
    assert "Adopted" in log, log


def test_what_a_worker_that_stopped_skipped_on_trust_is_fetched_when_a_live_one_ends_it(
    fresh_site: Site, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    # As above, but A is not killed: it crawls the teaser site to the end,
    # skipping the stories of articles 3 on on trust, and stops (its part
    # done, nothing unfinished). B, in the same run, then ends the trust.
    # A left no frontier rows, and it is taken over all the same: its skips
    # are B's to fetch. Before, a worker that left no rows was adopted by
    # nobody, and B fetched none of them.
    gate, settings, files, b = _waiting_worker(fresh_site, redis_url, redis_prefix, tmp_path, "b")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _workers_connected(redis_url, 1):
        time.sleep(0.02)
    a = _worker(settings, fresh_site.url("/", host="127.0.0.1"), files[0])
    log_a = a.communicate(timeout=120)[0]
    assert a.returncode == 0, log_a
    skipped = {f"/a/{n}" for n in range(3, 12)} - set(fresh_site.fetched())
    assert skipped, fresh_site.fetched()
    # B takes A over at its next look at the leases (A gave its lease up).
    while time.monotonic() < deadline and not any(
        r[0] == "a" for r in _log_records(redis_url, redis_prefix)
    ):
        time.sleep(0.05)
    gate.set()
    log = _ends_the_trust_keeping_every_story(b, fresh_site, skipped, files)
    assert "Took over worker" in log, log


def test_skips_on_trust_pass_on_when_an_adopter_dies_before_it_says_whom_it_adopted(
    fresh_site: Site, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    # As the chain above, with the adopter killed in the worst moment: it has
    # taken A's rows (the store's script) and not yet said so in the evidence
    # log. The adopter is a store in this process that adopts A and then
    # closes without a word; C, crawling, adopts it, is told by the store that
    # it had taken A over, and fetches A's skips when it ends the trust.
    # Before, A's skips stayed A's, and nobody fetched them.
    gate, settings, files, c = _waiting_worker(fresh_site, redis_url, redis_prefix, tmp_path, "c")
    a, skipped = _killed_after_its_skips(fresh_site, settings, redis_url, files[0], [c])
    b = _store(redis_url, settings["DEDUP_NAMESPACE"], redis_prefix, lease=2)
    b.keep_lease()
    names = [name.decode() for name in b.client.smembers(b._lease_base())]
    (name_a,) = [name for name in names if name.split("-")[2] == str(a.pid)]
    c.send_signal(signal.SIGSTOP)  # C must not adopt A first
    try:
        b.client.delete(b._lease_key(name_a))  # A's lease ends now
        adopted = b.adopt()
    finally:
        c.send_signal(signal.SIGCONT)
    assert [x.worker for x in adopted if x.rows] == [name_a], adopted
    lease_b = b._lease_key(b.worker)
    _die(b)  # without a record in the evidence log
    client = redis.Redis.from_url(redis_url)
    client.delete(lease_b)
    client.close()
    gate.set()
    _ends_the_trust_keeping_every_story(c, fresh_site, skipped, files)
