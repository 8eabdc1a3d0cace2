"""Benchmark the dedup stores (memory, SQLite, Redis, Redis Cluster) against anchors.

Run from the repository root::

    python benches/bench_stores.py             # defaults: about 2.5-4 minutes on 2 cores
    python benches/bench_stores.py --quick     # smaller sizes, under a minute
    python benches/bench_stores.py --no-cluster --redis redis://127.0.0.1:6379/0

Needs a Redis server (``--redis``, default ``redis://127.0.0.1:6379/0``; the
Redis parts are skipped with a message when it does not answer). Only keys
under a fresh prefix ``bench-<hex>`` are written, and they are deleted at the
end. For the cluster rows a throwaway 3-master Redis Cluster is started with
``tests/redis_servers.py`` (needs ``redis-server`` and ``redis-cli``; skipped
with a message when it cannot start, or with ``--no-cluster``).

Four measurements, each with its anchor in the same run:

1. ``request_seen`` (plus ``log()`` for each request judged duplicate, as
   Scrapy's scheduler calls them) per request, on the 30%-variant URL mix of
   ``bench_url_stage.py``, through ``CanonicalDupeFilter`` built by Scrapy's
   ``build_from_crawler`` with each ``DEDUP_STORE``: memory, memory + JOBDIR
   (SQLite, every seen key written), ``sqlite:///`` (only kept pages written),
   Redis on loopback, Redis Cluster. Anchors: Scrapy's ``RFPDupeFilter``
   (without and with JOBDIR). Redis runs start cold (a fresh namespace each
   repeat); a "second worker" row replays the same URLs through another filter
   of the same namespace after the first recorded them.
2. Redis memory per URL key: ``--mem-n`` keys recorded through
   ``RedisStore.add_url`` (keys of generated URLs), and ``--big-n`` random
   64-bit keys (bulk-loaded with pipelined HSETNX in the store's layout when
   going through the store would take over a minute; ``--big-via-store``
   forces the store). ``MEMORY USAGE`` summed over the namespace's hashes and
   the ``INFO memory`` ``used_memory`` delta, each per key. Anchor: a Redis SET
   of 40-character hex fingerprints (what scrapy-redis's ``RFPDupeFilter``
   keeps, one ``SADD`` per request).
3. SQLite: the time to open a store file holding ``--sqlite-n`` kept URL keys
   (they are read into memory) and the file size per key. Anchor: Scrapy's
   ``RFPDupeFilter`` opening a JOBDIR ``requests.seen`` with as many
   fingerprints.
4. Content stage: the store calls ``ContentDedupPipeline`` makes per item, in
   its order (``get_content``; ``match_near``, ``add_content``, ``add_near``
   with MinHash, or ``match_or_add_near`` then ``add_content`` on stores
   without the split API), inside ``hold()``/``release()``, on about
   ``--items`` real-text documents and edited copies, per store. Fingerprints
   are computed up front (their cost is reported separately).

The cyclic garbage collector is disabled inside timed regions (as ``timeit``
does). Performance is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import os
import random
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT)]  # bench_url_stage, tests

import numpy as np  # noqa: E402
import redis  # noqa: E402
import scrapy  # noqa: E402
from bench_url_stage import _version, make_urls, print_machine, table, unique_url_batches  # noqa: E402
from scrapy import Request, Spider  # noqa: E402
from scrapy.dupefilters import RFPDupeFilter  # noqa: E402
from scrapy.utils.misc import build_from_crawler  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

import scrapy_dedup  # noqa: E402
from scrapy_dedup import CanonicalDupeFilter, URLCanonicalizer  # noqa: E402
from scrapy_dedup.keys import url_info, url_key  # noqa: E402
from scrapy_dedup.stores import DedupStore, SqliteStore, open_store  # noqa: E402
from scrapy_dedup.stores.redis import RedisStore, memory_usage  # noqa: E402
from scrapy_dedup.text import content_digest  # noqa: E402
from scrapy_dedup.text.near import MinHashMethod  # noqa: E402
from tests.text import neardup_corpus  # noqa: E402

DEFAULTS: dict[str, int] = {
    "n": 50_000,
    "repeat": 3,
    "redis_repeat": 2,
    "mem_n": 200_000,
    "big_n": 1_000_000,
    "sqlite_n": 1_000_000,
    "items": 2_000,
}
QUICK: dict[str, int] = {
    "n": 10_000,
    "repeat": 2,
    "redis_repeat": 1,
    "mem_n": 50_000,
    "big_n": 0,
    "sqlite_n": 200_000,
    "items": 600,
}
#: Load ``--big-n`` keys through ``RedisStore.add_url`` only if that would take
#: less than this (estimated from the ``--mem-n`` run; one round trip per key is
#: 35-190 us on this VM, 35-190 s for 1M keys), else bulk-load them in its layout.
STORE_LOAD_BUDGET_S = 60.0
_LOW48 = (1 << 48) - 1


# --- Helpers ----------------------------------------------------------------------


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def us(seconds: float, count: int) -> str:
    return f"{seconds * 1e6 / count:.2f}"


def per_s(seconds: float, count: int) -> str:
    return f"{count / seconds:,.0f}"


def ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}x" if b else "-"


def evalsha_calls(clients: Sequence[redis.Redis]) -> int:
    """EVALSHA calls served so far, summed over ``clients``' servers (``INFO commandstats``)."""
    total = 0
    for client in clients:
        stats = client.info("commandstats")
        total += int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
    return total


def command_calls(clients: Sequence[redis.Redis]) -> int:
    """Commands of any kind served so far, summed over ``clients``' servers."""
    total = 0
    for client in clients:
        stats = client.info("commandstats")
        total += sum(int(v.get("calls", 0)) for k, v in stats.items() if k != "cmdstat_info")
    return total


def used_memory(client: redis.Redis) -> int:
    """``used_memory`` once no lazy free is pending (an UNLINK frees in the background)."""
    for _ in range(200):
        info = client.info("memory")
        if not int(info.get("lazyfree_pending_objects", 0)):
            return int(info["used_memory"])
        time.sleep(0.01)
    return int(client.info("memory")["used_memory"])


def delete_matching(client: redis.Redis, pattern: str) -> int:
    """DEL (synchronous, so ``used_memory`` drops at once) every key matching ``pattern``."""
    names = list(client.scan_iter(match=pattern, count=1000))
    for i in range(0, len(names), 1000):
        client.delete(*names[i : i + 1000])
    return len(names)


def ping_us(client: Any, count: int = 2000) -> float:
    """Mean microseconds of a PING round trip."""
    client.ping()
    with no_gc():
        t0 = time.perf_counter()
        for _ in range(count):
            client.ping()
        return (time.perf_counter() - t0) * 1e6 / count


@dataclass
class Env:
    """Where the stores live during this run."""

    tmp: Path
    prefix: str  # every Redis key written starts with "<prefix>:"
    redis_uri: str | None  # None: no Redis server answered
    redis_client: redis.Redis | None
    cluster_url: str | None  # None: no cluster
    cluster_nodes: list[redis.Redis]
    pings: list[float] = field(default_factory=list)  # PING us, taken before Redis runs
    _serial: int = 0

    def fresh(self, stem: str) -> str:
        """A name used once in this run (namespaces, file names)."""
        self._serial += 1
        return f"{stem}{self._serial}"


# --- 1. request_seen per store ------------------------------------------------------


def build_filter(settings: dict[str, Any]) -> tuple[Any, Spider]:
    """A CanonicalDupeFilter (or, with ``anchor``, RFPDupeFilter) as Scrapy builds it."""
    settings = dict(settings)
    if settings.pop("anchor", False):
        crawler = get_crawler(settings_dict=settings)
        return build_from_crawler(RFPDupeFilter, crawler), Spider.from_crawler(crawler, "b")
    crawler = get_crawler(
        settings_dict={"DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter", **settings}
    )
    return build_from_crawler(CanonicalDupeFilter, crawler), Spider.from_crawler(crawler, "b")


def time_filter(df: Any, spider: Spider, urls: Sequence[str]) -> tuple[float, int]:
    """Seconds for one pass of request_seen (+ log for duplicates) over fresh
    requests, the store's final flush included; and the duplicates judged."""
    requests = [Request(u) for u in urls]  # fresh objects, outside the timer
    seen, log = df.request_seen, df.log
    store = getattr(df, "store", None)
    with no_gc():
        t0 = time.perf_counter()
        count = 0
        for r in requests:  # as Scrapy's scheduler calls them
            if seen(r):
                log(r, spider)
                count += 1
        if store is not None:
            store.flush()  # JOBDIR: commit the last batch of seen keys
        elapsed = time.perf_counter() - t0
    return elapsed, count


@dataclass
class Row:
    label: str
    best: float = float("inf")
    dups: int = -1
    round_trips: int | None = None
    times: list[float] = field(default_factory=list)

    def add(self, elapsed: float, dups: int, round_trips: int | None = None) -> None:
        self.best = min(self.best, elapsed)
        self.dups = dups
        self.round_trips = round_trips
        self.times.append(elapsed)

    def spread(self) -> str:
        """Slowest run / fastest run."""
        return f"{max(self.times) / self.best:.2f}"


def local_settings(env: Env, kind: str) -> dict[str, Any]:
    ns = env.fresh("ns")
    if kind == "anchor":
        return {"anchor": True}
    if kind == "anchor_jobdir":
        return {"anchor": True, "JOBDIR": str(env.tmp / env.fresh("rfp-job"))}
    if kind == "memory":
        return {"DEDUP_STORE": "memory", "DEDUP_NAMESPACE": ns}
    if kind == "jobdir":
        return {
            "DEDUP_STORE": "memory",
            "DEDUP_NAMESPACE": ns,
            "JOBDIR": str(env.tmp / env.fresh("job")),
        }
    if kind == "sqlite":
        path = env.tmp / f"{env.fresh('kept')}.sqlite3"
        return {"DEDUP_STORE": f"sqlite:///{path}", "DEDUP_NAMESPACE": ns}
    raise ValueError(kind)


def run_redis_pair(
    env: Env, uri: str, nodes: Sequence[redis.Redis], urls: Sequence[str], second: bool
) -> tuple[tuple[float, int, int], tuple[float, int, int] | None]:
    """A cold first worker over ``urls`` and, with ``second``, a second worker of
    the same namespace replaying them: (seconds, duplicates, EVALSHA calls) each."""
    settings = {
        "DEDUP_STORE": uri,
        "DEDUP_NAMESPACE": env.fresh("ns"),
        "DEDUP_REDIS_PREFIX": env.prefix,
    }
    results: list[tuple[float, int, int]] = []
    for _ in range(2 if second else 1):
        df, spider = build_filter(settings)
        env.pings.append(ping_us(nodes[0], 500))  # how fast round trips are right now
        before = evalsha_calls(nodes)
        elapsed, dups = time_filter(df, spider, urls)
        calls = evalsha_calls(nodes) - before
        df.close("finished")
        results.append((elapsed, dups, calls))
    return results[0], (results[1] if second else None)


def measure_request_seen(env: Env, args: argparse.Namespace) -> dict[str, Row]:
    urls, kinds = make_urls(args.n, args.seed)
    variants = sum(kinds.values())
    print(f"\n1. request_seen + log() per request ({args.n} requests, ~200 hosts)")
    print(
        f"   mix: {variants} ({variants / args.n:.0%}) are variants of earlier URLs serving "
        "the same page (the URL mix of bench_url_stage.py)"
    )
    rows: dict[str, Row] = {
        "anchor": Row("Scrapy RFPDupeFilter (anchor)"),
        "anchor_jobdir": Row("Scrapy RFPDupeFilter + JOBDIR"),
        "memory": Row("ours + memory"),
        "jobdir": Row("ours + JOBDIR (SQLite, seen)"),
        "sqlite": Row("ours + sqlite:/// (kept)"),
    }
    if env.redis_uri:
        rows["redis"] = Row("ours + Redis (loopback)")
        rows["redis2"] = Row("ours + Redis, second worker")
    if env.cluster_url:
        rows["cluster"] = Row("ours + Redis Cluster (3)")
    # Warm up once per process: public suffix list, Scrapy's fingerprinter, imports.
    for kind in ("anchor", "memory"):
        df, spider = build_filter(local_settings(env, kind))
        time_filter(df, spider, urls[:2000])
        df.close("finished")
    local = ["anchor", "anchor_jobdir", "memory", "jobdir", "sqlite"]
    for rep in range(args.repeat):
        for kind in local if rep % 2 == 0 else local[::-1]:
            df, spider = build_filter(local_settings(env, kind))
            elapsed, dups = time_filter(df, spider, urls)
            df.close("finished")
            rows[kind].add(elapsed, dups, None if kind.startswith("anchor") else 0)
        if rep < args.redis_repeat and env.redis_uri and env.redis_client is not None:
            first, second = run_redis_pair(env, env.redis_uri, [env.redis_client], urls, True)
            rows["redis"].add(*first)
            if second is not None:
                rows["redis2"].add(*second)
        if rep < args.redis_repeat and env.cluster_url:
            first, _ = run_redis_pair(env, env.cluster_url, env.cluster_nodes, urls, False)
            rows["cluster"].add(*first)
        gc.collect()

    t_mem, t_anchor = rows["memory"].best, rows["anchor"].best
    out = []
    for row in rows.values():
        trips = "" if row.round_trips is None else f"{row.round_trips / args.n:.3f}"
        out.append(
            [
                row.label,
                us(row.best, args.n),
                per_s(row.best, args.n),
                ratio(row.best, t_mem),
                ratio(row.best, t_anchor),
                f"{row.dups} ({row.dups / args.n:.1%})",
                trips,
                f"{len(row.times)}",
                row.spread(),
            ]
        )
    header = [
        "filter + store",
        "us/request",
        "requests/s",
        "vs memory",
        "vs RFPDupeFilter",
        "judged duplicate",
        "EVALSHA/request",
        "best of",
        "worst/best",
    ]
    print(table(header, out))
    if env.pings:
        print(
            f"   PING round trip measured before each Redis run: {min(env.pings):.0f}-"
            f"{max(env.pings):.0f} us (this VM's loopback latency drifts over minutes)"
        )
    if "redis" in rows:
        r1 = rows["redis"]
        new_keys = r1.round_trips or 0
        print(
            f"   Redis, first worker: {new_keys} EVALSHA round trips for {args.n} requests "
            f"(one per key new to the process; {args.n - new_keys} requests answered "
            "from its local cache)"
        )
        if "redis2" in rows and rows["redis2"].round_trips:
            r2 = rows["redis2"]
            extra = (r2.best - t_mem) / max(r2.round_trips or 1, 1)
            print(
                f"   Redis, second worker: every request is filtered; {r2.round_trips} "
                f"round trips (each key once), about {extra * 1e6:.0f} us each over memory"
            )
    return rows


# --- 2. Redis bytes per URL key ------------------------------------------------------


def url_keys(n: int, seed: int) -> tuple[list[int], list[int], list[str]]:
    """Keys, infos and URLs of ``n`` distinct pages (the dupefilter's keys, GET, no body)."""
    canonicalizer = URLCanonicalizer()
    keys: list[int] = []
    infos: list[int] = []
    urls: list[str] = []
    for batch in unique_url_batches(n, seed, 10_000):
        for url in batch:
            canonical, mask = canonicalizer.canonicalize_traced(url)
            keys.append(url_key("GET", canonical))
            infos.append(url_info(url, mask))
            urls.append(url)
    if len(set(keys)) != n:
        raise AssertionError("generated URL keys are not distinct")
    return keys, infos, urls


def random_keys(n: int, seed: int) -> tuple[list[int], list[int]]:
    """``n`` distinct random 64-bit keys, and infos shaped like ``url_info`` (CRC-32 << 16)."""
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, 2**64, size=n + n // 100 + 10, dtype=np.uint64))
    keys = rng.permutation(keys)[:n]
    infos = (rng.integers(0, 2**32, size=n, dtype=np.uint64) << np.uint64(16)) | rng.integers(
        0, 16, size=n, dtype=np.uint64
    )
    return keys.tolist(), infos.tolist()


def bulk_load(
    client: redis.Redis, base: str, keys: Sequence[int], infos: Sequence[int], run: bytes
) -> None:
    """Pipelined HSETNX in RedisStore's URL layout: hash ``<base>:u:<top 16 bits>``,
    field = low 48 bits as 6 little-endian bytes, value = ``<info>:<run>`` (what
    ``RedisStore.add_url`` writes in run ``run``)."""
    chunk = 20_000
    for i in range(0, len(keys), chunk):
        pipe = client.pipeline(transaction=False)
        for key, info in zip(keys[i : i + chunk], infos[i : i + chunk], strict=True):
            field = (key & _LOW48).to_bytes(6, "little")
            pipe.hsetnx(f"{base}:u:{key >> 48:04x}", field, b"%d:%s" % (info, run))
        pipe.execute()


def sadd_load(client: redis.Redis, name: str, members: Sequence[str]) -> None:
    """The anchor: members added to one SET (pipelined, 1000 members per SADD;
    the SET's size does not depend on how its members arrive)."""
    pipe = client.pipeline(transaction=False)
    for i in range(0, len(members), 1000):
        pipe.sadd(name, *members[i : i + 1000])
        if len(pipe) >= 200:
            pipe.execute()
    pipe.execute()


@dataclass
class MemResult:
    label: str
    n: int
    usage: int  # MEMORY USAGE summed
    delta: int  # used_memory after - before
    keys: int  # Redis keys
    load_s: float
    how: str


def measure_ours(
    client: redis.Redis,
    prefix: str,
    n: int,
    keys: Sequence[int],
    infos: Sequence[int],
    through_store: bool,
) -> MemResult:
    ns = f"mem{n}"
    base = f"{prefix}:{ns}"
    # Opened first: it starts the namespace's run, whose id a stored URL value carries.
    store = RedisStore(client, ns, prefix=prefix)
    before = used_memory(client)
    t0 = time.perf_counter()
    if through_store:
        add = store.add_url
        for key, info in zip(keys, infos, strict=True):
            add(key, info)
        how = "RedisStore.add_url, one EVALSHA per key"
    else:
        bulk_load(client, base, keys, infos, store._run_bytes)
        how = "pipelined HSETNX in RedisStore's layout"
    load_s = time.perf_counter() - t0
    delta = used_memory(client) - before
    if not through_store:  # the layout must be the store's: read a sample back through it
        for key, info in list(zip(keys, infos, strict=True))[:: max(1, n // 1000)]:
            if store.get_url(key) != info:
                raise AssertionError("bulk-loaded layout differs from RedisStore's")
    usage = memory_usage(client, f"{base}:u:*")
    count = delete_matching(client, f"{base}:*")
    return MemResult(f"ours, {n:,} keys", n, usage, delta, count, load_s, how)


def measure_sadd(client: redis.Redis, prefix: str, n: int, members: Sequence[str]) -> MemResult:
    name = f"{prefix}:anchor-sadd:{n}"
    before = used_memory(client)
    t0 = time.perf_counter()
    sadd_load(client, name, members)
    load_s = time.perf_counter() - t0
    delta = used_memory(client) - before
    if client.scard(name) != n:
        raise AssertionError("SADD anchor lost members")
    usage = int(client.memory_usage(name, samples=0) or 0)
    client.delete(name)
    return MemResult(
        f"anchor SADD, {n:,} keys", n, usage, delta, 1, load_s, "pipelined SADD, 1000/command"
    )


def measure_redis_memory(env: Env, args: argparse.Namespace) -> list[tuple[MemResult, ...]]:
    client = env.redis_client
    assert client is not None
    limit = client.config_get("hash-max-listpack-entries").get("hash-max-listpack-entries")
    print(
        f"\n2. Redis memory per URL key (server at {env.redis_uri}; "
        f"hash-max-listpack-entries {limit})"
    )
    pairs: list[tuple[MemResult, ...]] = []
    keys, infos, urls = url_keys(args.mem_n, args.seed + 1)
    ours = measure_ours(client, env.prefix, args.mem_n, keys, infos, through_store=True)
    # scrapy-redis keeps sha1(...).hexdigest() per request: 40 hex characters.
    anchor = measure_sadd(
        client, env.prefix, args.mem_n, [hashlib.sha1(u.encode()).hexdigest() for u in urls]
    )
    pairs.append((ours, anchor))
    del keys, infos, urls
    store_us = ours.load_s / args.mem_n
    if args.big_n:
        estimate = store_us * args.big_n
        through = args.big_via_store or estimate < STORE_LOAD_BUDGET_S
        print(
            f"   {args.big_n:,} keys: random 64-bit keys (url_key is a blake2b hash: as "
            f"uniform); through the store that would take ~{estimate:.0f} s "
            f"({store_us * 1e6:.0f} us/key above), so "
            + (
                "they go through RedisStore.add_url"
                if through
                else "they are bulk-loaded with pipelined HSETNX in RedisStore's layout "
                "(checked by reading a sample back through RedisStore.get_url)"
            )
        )
        bkeys, binfos = random_keys(args.big_n, args.seed + 2)
        ours_big = measure_ours(client, env.prefix, args.big_n, bkeys, binfos, through)
        members = [hashlib.sha1(k.to_bytes(8, "little")).hexdigest() for k in bkeys]
        del bkeys, binfos
        anchor_big = measure_sadd(client, env.prefix, args.big_n, members)
        del members
        pairs.append((ours_big, anchor_big))
    out = []
    for ours_r, anchor_r in pairs:
        for r in (ours_r, anchor_r):
            out.append(
                [
                    r.label,
                    f"{r.usage / r.n:.1f}",
                    f"{r.delta / r.n:.1f}",
                    f"{r.usage / 2**20:.1f}",
                    f"{r.keys:,}",
                    f"{r.load_s:.1f}",
                    r.how,
                ]
            )
        out.append(
            [
                "  ratio ours/anchor",
                ratio(ours_r.usage, anchor_r.usage),
                ratio(ours_r.delta, anchor_r.delta),
                "",
                "",
                "",
                "",
            ]
        )
    header = [
        "what",
        "MEMORY USAGE B/key",
        "used_memory delta B/key",
        "MiB",
        "Redis keys",
        "load s",
        "loaded with",
    ]
    print(table(header, out))
    print(
        f"   ours at {args.mem_n:,}: keys of generated URLs, loaded through the store "
        f"({store_us * 1e6:.0f} us/key, one round trip each); anchor members: sha1 hex of "
        "the same URLs. used_memory is server-wide: other clients of this server add noise."
    )
    return pairs


# --- 3. SQLite: opening a file of 1M kept keys -------------------------------------


def measure_sqlite_open(env: Env, args: argparse.Namespace) -> dict[str, float]:
    n = args.sqlite_n
    print(f"\n3. SQLite: opening a store with {n:,} kept URL keys (sqlite:///, persist='kept')")
    keys, infos = random_keys(n, args.seed + 3)
    path = env.tmp / "open-bench.sqlite3"
    store = SqliteStore(path, "bench", persist="kept")
    with no_gc():
        t0 = time.perf_counter()
        keep = store.keep_url
        for key, info in zip(keys, infos, strict=True):
            keep(key, info)
        store.close()
        write_s = time.perf_counter() - t0
    del store
    size = path.stat().st_size + sum(
        p.stat().st_size for p in (Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )
    repeat = max(args.repeat, 1)
    best_open = float("inf")
    loaded = 0
    nbytes = 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        store = SqliteStore(path, "bench", persist="kept")
        best_open = min(best_open, time.perf_counter() - t0)
        loaded, nbytes = store.url_count(), store._urls.nbytes()
        store.close()
        del store
    # Where the open time goes, each step timed alone on the same (cached) file.
    db = sqlite3.connect(path)
    t0 = time.perf_counter()
    db.execute("PRAGMA quick_check").fetchall()
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = db.execute("SELECT key, info FROM urls WHERE ns = 1").fetchall()
    t_select = time.perf_counter() - t0
    t0 = time.perf_counter()
    pairs = np.array(rows, dtype=np.int64)
    t_array = time.perf_counter() - t0
    db.close()
    del rows, pairs
    # Anchor: Scrapy's RFPDupeFilter reading a JOBDIR requests.seen of n fingerprints
    # (2-byte big-endian length + 20-byte SHA-1 each, as Scrapy 2.19 writes them).
    jobdir = env.tmp / "rfp-open"
    jobdir.mkdir()
    seen = jobdir / "requests.seen"
    with seen.open("wb") as f:
        for key in keys:
            f.write(b"\x00\x14" + hashlib.sha1(key.to_bytes(8, "little")).digest())
    del keys, infos
    best_anchor = float("inf")
    for _ in range(repeat):
        gc.collect()
        crawler = get_crawler(settings_dict={"JOBDIR": str(jobdir)})
        t0 = time.perf_counter()
        df = build_from_crawler(RFPDupeFilter, crawler)
        best_anchor = min(best_anchor, time.perf_counter() - t0)
        df.close("finished")
        del df
    gc.collect()
    anchor_size = seen.stat().st_size
    rows_out = [
        [
            "ours: SqliteStore(...) open + load",
            f"{best_open:.3f}",
            f"{best_open * 1e6 / n:.2f}",
            f"{size / n:.1f}",
            f"{size / 2**20:.1f}",
        ],
        [
            "anchor: RFPDupeFilter + JOBDIR",
            f"{best_anchor:.3f}",
            f"{best_anchor * 1e6 / n:.2f}",
            f"{anchor_size / n:.1f}",
            f"{anchor_size / 2**20:.1f}",
        ],
        [
            "ratio ours/anchor",
            ratio(best_open, best_anchor),
            "",
            ratio(size, anchor_size),
            "",
        ],
    ]
    print(table(["what", "open s", "us/key", "file B/key", "file MiB"], rows_out))
    print(
        f"   best of {repeat}, file in the OS page cache (just written). Loaded {loaded:,} "
        f"keys; in memory after load: {nbytes / n:.0f} B/key (CompactMap arrays)."
    )
    print(
        f"   steps alone: PRAGMA quick_check {t_check:.3f} s, SELECT key, info "
        f"{t_select:.3f} s, rows -> numpy {t_array:.3f} s; the rest is the sort "
        "(CompactMap.update) and opening."
    )
    print(
        f"   writing the file: {n:,} keep_url() calls + commits every 2000 rows took "
        f"{write_s:.1f} s ({write_s * 1e6 / n:.1f} us/key)"
    )
    return {"open": best_open, "anchor": best_anchor, "size": size / n}


# --- 4. Content stage: store calls per item ------------------------------------------


def content_items(target: int, seed: int) -> list[tuple[str, str]]:
    """``(url, text)``: real documents and edited copies of them, shuffled."""
    rng = random.Random(seed)
    docs = neardup_corpus.documents(min_words=200, max_words=600)
    vocab = neardup_corpus.vocabulary()
    texts = list(docs)
    while len(texts) < target:
        doc = rng.choice(docs)
        words = len(doc.split())
        kind = rng.random()
        if kind < 0.2:
            texts.append(doc)  # exact copy
        elif kind < 0.35:
            texts.append(neardup_corpus.case_whitespace(doc, rng))  # same digest
        elif kind < 0.65:
            texts.append(
                neardup_corpus.swap_words(doc, neardup_corpus.n_edits(words, 0.01), rng, vocab)
            )
        elif kind < 0.85:
            texts.append(
                neardup_corpus.insert_delete(doc, neardup_corpus.n_edits(words, 0.02), rng, vocab)
            )
        else:  # a different document (a quarter of its words changed): kept
            texts.append(
                neardup_corpus.swap_words(doc, neardup_corpus.n_edits(words, 0.25), rng, vocab)
            )
    rng.shuffle(texts)
    return [(f"https://site{i % 50}.test/page/{i}", t) for i, t in enumerate(texts)]


#: Whether stores split the near-duplicate step into ``match_near`` and
#: ``add_near`` (the pipeline then claims the digest in between).
SPLIT_NEAR = hasattr(DedupStore, "add_near")


def content_kind(
    store: Any, method: MinHashMethod, url: str, digest: bytes, fingerprint: Any
) -> str:
    """The store calls ContentDedupPipeline makes for one item, in its order."""
    if store.get_content(digest) is not None:
        return "exact"
    if SPLIT_NEAR:
        if store.match_near(method, fingerprint) is not None:
            return "near"
        if store.add_content(digest, url) is not None:
            return "exact"
        store.add_near(method, fingerprint, url)
        return "kept"
    if store.match_or_add_near(method, fingerprint, url) is not None:
        return "near"
    return "exact" if store.add_content(digest, url) is not None else "kept"


def run_content(
    store: DedupStore, method: MinHashMethod, prepared: Sequence[tuple[str, bytes, Any]]
) -> tuple[float, dict[str, int]]:
    """What ContentDedupPipeline asks the store per item; seconds and outcomes."""
    outcome = {"kept": 0, "exact": 0, "near": 0}
    with no_gc():
        t0 = time.perf_counter()
        for url, digest, fingerprint in prepared:
            with store.hold() as held:
                kind = content_kind(store, method, url, digest, fingerprint)
            if kind == "kept":
                store.release(held)  # item_scraped: its writes become durable
            else:
                store.discard(held)  # DropItem
            outcome[kind] += 1
        store.flush()
        elapsed = time.perf_counter() - t0
    return elapsed, outcome


def measure_content(env: Env, args: argparse.Namespace) -> dict[str, float]:
    items = content_items(args.items, args.seed + 4)
    method = MinHashMethod()
    calls = (
        "get_content, match_near, add_content, add_near"
        if SPLIT_NEAR
        else "get_content, match_or_add_near, add_content"
    )
    print(
        f"\n4. content stage: store calls per item ({len(items)} items: real documents "
        f"of 200-600 words and edited copies; {calls}, inside hold()/release())"
    )
    t0 = time.perf_counter()
    prepared = [(url, content_digest(text), method.fingerprint(text)) for url, text in items]
    t_fp = time.perf_counter() - t0
    # name -> (open a fresh store, the Redis servers it talks to)
    kinds: dict[str, tuple[Callable[[], DedupStore], list[redis.Redis]]] = {
        "memory": (lambda: open_store("memory", env.fresh("c")), []),
        "sqlite:/// (kept)": (
            lambda: open_store(f"sqlite:///{env.tmp / (env.fresh('content') + '.sqlite3')}", "c"),
            [],
        ),
    }
    if env.redis_uri and env.redis_client is not None:
        uri = env.redis_uri
        kinds["Redis (loopback)"] = (
            lambda: open_store(uri, env.fresh("c"), prefix=env.prefix),
            [env.redis_client],
        )
    if env.cluster_url:
        curl = env.cluster_url
        kinds["Redis Cluster (3)"] = (
            lambda: open_store(curl, env.fresh("c"), prefix=env.prefix),
            env.cluster_nodes,
        )
    best: dict[str, float] = {}
    outcomes: dict[str, dict[str, int]] = {}
    runs: dict[str, int] = {}
    commands: dict[str, int] = {}
    for rep in range(args.repeat):
        for name in kinds if rep % 2 == 0 else list(kinds)[::-1]:
            opener, servers = kinds[name]
            if servers and rep >= args.redis_repeat:
                continue
            store = opener()
            before = command_calls(servers)
            elapsed, outcome = run_content(store, method, prepared)
            commands[name] = command_calls(servers) - before
            store.close()
            best[name] = min(best.get(name, float("inf")), elapsed)
            outcomes[name] = outcome
            runs[name] = runs.get(name, 0) + 1
    n = len(prepared)
    t_mem = best["memory"]
    out = [
        [
            name,
            us(t, n),
            per_s(t, n),
            ratio(t, t_mem),
            " / ".join(str(outcomes[name][k]) for k in ("kept", "exact", "near")),
            f"{commands[name] / n:.1f}" if kinds[name][1] else "",
            str(runs[name]),
        ]
        for name, t in best.items()
    ]
    header = ["store", "us/item", "items/s", "vs memory", "kept/exact/near"]
    print(table([*header, "Redis commands/item", "best of"], out))
    if len({tuple(o.values()) for o in outcomes.values()}) != 1:
        print("   WARNING: the stores disagree on the outcomes")
    print(
        f"   for context, fingerprints (computed up front, the same for every store): "
        f"content_digest + MinHash {t_fp * 1e6 / n:.0f} us/item"
    )
    return {"fingerprint": t_fp / n, **{k: v / n for k, v in best.items()}}


# --- Main ---------------------------------------------------------------------------


def connect_redis(uri: str) -> redis.Redis | None:
    try:
        client = redis.Redis.from_url(uri, socket_connect_timeout=2, socket_timeout=30)
        client.ping()
    except redis.RedisError as exc:
        print(f"  redis     no server at {uri} ({exc}): Redis measurements skipped")
        return None
    return client


def start_cluster(tmp: Path) -> tuple[Any, list[redis.Redis]] | None:
    try:
        from tests.redis_servers import start_cluster as start
    except ImportError as exc:
        print(f"  cluster   cannot import tests.redis_servers ({exc}): skipped")
        return None
    try:
        handle = start(tmp / "cluster", masters=3)
    except Exception as exc:
        print(f"  cluster   did not start ({type(exc).__name__}: {exc}): skipped")
        return None
    nodes = [redis.Redis(host="127.0.0.1", port=port) for port in handle.ports]
    print(
        f"  cluster   3 masters started in {handle.startup_seconds:.1f} s "
        f"(ports {', '.join(map(str, handle.ports))})"
    )
    return handle, nodes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, help=f"requests timed (default {DEFAULTS['n']})")
    parser.add_argument("--repeat", type=int, help="repeats, memory/SQLite (default 3)")
    parser.add_argument("--redis-repeat", type=int, help="repeats, Redis rows (default 2)")
    parser.add_argument("--mem-n", type=int, help="URL keys for Redis memory (default 200000)")
    parser.add_argument("--big-n", type=int, help="larger Redis memory run, 0: skip (1000000)")
    parser.add_argument(
        "--big-via-store", action="store_true", help="--big-n keys through the store, however slow"
    )
    parser.add_argument("--sqlite-n", type=int, help="kept keys in the SQLite file (1000000)")
    parser.add_argument("--items", type=int, help="items, content stage (default 2000)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis server URI")
    parser.add_argument("--no-cluster", action="store_true", help="skip the Redis Cluster rows")
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    sizes = (args.n, args.repeat, args.mem_n, args.sqlite_n, args.items)
    if min(sizes) < 1 or args.big_n < 0 or args.redis_repeat < 0:
        parser.error("sizes and --repeat must be positive")

    started = time.perf_counter()
    print("scrapy-dedup store benchmark")
    print_machine()
    print(
        f"  versions  scrapy {scrapy.__version__}   redis-py {redis.__version__}   "
        f"numpy {np.__version__}   sqlite {sqlite3.sqlite_version}   "
        f"scrapy_dedup {_version('scrapy-dedup')} ({os.path.dirname(scrapy_dedup.__file__)})"
    )
    print(f"  load avg  {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")
    client = connect_redis(args.redis)
    prefix = f"bench-{uuid.uuid4().hex[:12]}"
    cluster: tuple[Any, list[redis.Redis]] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-stores-") as tmpdir:
        tmp = Path(tmpdir)
        try:
            if client is not None:
                server = client.info("server")
                print(
                    f"  redis     server {server['redis_version']} at {args.redis}, "
                    f"keys under '{prefix}:*' (deleted at the end); PING round trip "
                    f"{ping_us(client):.0f} us"
                )
            if not args.no_cluster and client is not None:
                cluster = start_cluster(tmp)
            elif args.no_cluster:
                print("  cluster   skipped (--no-cluster)")
            env = Env(
                tmp=tmp,
                prefix=prefix,
                redis_uri=args.redis if client is not None else None,
                redis_client=client,
                cluster_url=cluster[0].url if cluster else None,
                cluster_nodes=cluster[1] if cluster else [],
            )
            if cluster:
                from redis.cluster import RedisCluster

                rc = RedisCluster.from_url(cluster[0].url.replace("redis+cluster", "redis"))
                print(f"  cluster   PING round trip through RedisCluster {ping_us(rc):.0f} us")
                rc.close()
            print(
                f"  sizes     {args.n} requests (best of {args.repeat}; Redis rows best of "
                f"{min(args.redis_repeat, args.repeat)}), {args.mem_n:,} + {args.big_n:,} keys "
                f"for Redis memory, {args.sqlite_n:,} SQLite keys, {args.items} items, "
                f"seed {args.seed}"
            )

            section = time.perf_counter()
            rows = measure_request_seen(env, args)
            print(f"   ({time.perf_counter() - section:.0f}s)")

            mem_pairs: list[tuple[MemResult, ...]] = []
            if client is not None:
                section = time.perf_counter()
                mem_pairs = measure_redis_memory(env, args)
                print(f"   ({time.perf_counter() - section:.0f}s)")

            section = time.perf_counter()
            sqlite_res = measure_sqlite_open(env, args)
            print(f"   ({time.perf_counter() - section:.0f}s)")

            section = time.perf_counter()
            content = measure_content(env, args)
            print(f"   ({time.perf_counter() - section:.0f}s)")

            explain(args, rows, mem_pairs, sqlite_res, content)
            if args.json:
                write_json(
                    args,
                    sys.argv[1:] if argv is None else argv,
                    rows,
                    mem_pairs,
                    sqlite_res,
                    content,
                )
        finally:
            if client is not None:
                removed = 0
                for name in client.scan_iter(match=f"{prefix}:*", count=1000):
                    client.unlink(name)
                    removed += 1
                print(f"\n(cleanup: {removed} Redis keys under '{prefix}:*' deleted)")
            if cluster is not None:
                for node in cluster[1]:
                    node.close()
                cluster[0].stop()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"(wall {time.perf_counter() - started:.0f}s; load avg at the end {load})")
    return 0


def write_json(
    args: argparse.Namespace,
    argv: Sequence[str],
    rows: dict[str, Row],
    mem_pairs: Sequence[tuple[MemResult, ...]],
    sqlite_res: dict[str, float],
    content: dict[str, float],
) -> None:
    """The headline figures, each with its anchor, as JSON (``--json``)."""
    from _results import Results

    results = Results("bench_stores", argv)
    n = args.n
    pairs = [
        ("memory", "anchor", "request_seen + log(), memory store, vs RFPDupeFilter"),
        ("sqlite", "anchor", "request_seen + log(), sqlite:///, vs RFPDupeFilter"),
        ("jobdir", "anchor_jobdir", "request_seen + log(), JOBDIR, vs RFPDupeFilter + JOBDIR"),
        ("redis", "anchor", "request_seen + log(), Redis (loopback), vs RFPDupeFilter"),
        ("cluster", "anchor", "request_seen + log(), Redis Cluster, vs RFPDupeFilter"),
    ]
    for ours, anchor, metric in pairs:
        if ours in rows and rows[ours].times:
            results.add(metric, rows[ours].best * 1e6 / n, rows[anchor].best * 1e6 / n, unit="us")
    for ours_r, anchor_r in mem_pairs:
        results.add(
            f"Redis memory per URL key at {ours_r.n:,}, vs scrapy-redis's SET",
            ours_r.usage / ours_r.n,
            anchor_r.usage / anchor_r.n,
            unit="B",
        )
    results.add(
        f"SQLite open with {args.sqlite_n:,} kept keys, vs RFPDupeFilter + JOBDIR",
        sqlite_res["open"],
        sqlite_res["anchor"],
        unit="s",
    )
    for name, per_item in content.items():
        if name not in ("fingerprint", "memory"):
            results.add(
                f"content stage store calls per item, {name}, vs memory store",
                per_item * 1e6,
                content["memory"] * 1e6,
                unit="us",
            )
    results.write(args.json)


def explain(
    args: argparse.Namespace,
    rows: dict[str, Row],
    mem_pairs: Sequence[tuple[MemResult, ...]],
    sqlite_res: dict[str, float],
    content: dict[str, float],
) -> None:
    n = args.n
    t_mem = rows["memory"].best * 1e6 / n
    parts = [
        f"\nWhat costs what: with memory, JOBDIR and sqlite:/// every answer comes from "
        f"process memory (ours + memory {t_mem:.1f} us/request); JOBDIR adds batched "
        f"INSERTs of every new key ({rows['jobdir'].best * 1e6 / n:.1f} us), sqlite:/// "
        f"writes nothing from request_seen, only the keys of pages whose items are kept "
        f"({rows['sqlite'].best * 1e6 / n:.1f} us)."
    ]
    if "redis" in rows:
        r1, r2 = rows["redis"], rows["redis2"]
        trips = r1.round_trips or 1
        per_trip = (r1.best - rows["memory"].best) / trips * 1e6
        parts.append(
            f" Redis costs one EVALSHA round trip per key new to the process "
            f"({trips / n:.2f} per request here, about {per_trip:.0f} us each on loopback), "
            f"so a first worker runs at {r1.best * 1e6 / n:.0f} us/request; a filtered "
            f"request whose key this process has seen costs no round trip, one seen only "
            f"by another worker costs one (second worker: {r2.best * 1e6 / n:.0f} us/request)."
        )
    if "cluster" in rows:
        parts.append(
            f" A Redis Cluster (3 masters on this machine) needs the same round trips, "
            f"each to the node owning the hash, plus the cluster client's routing "
            f"({rows['cluster'].best * 1e6 / n:.0f} us/request)."
        )
    if mem_pairs:
        ours, anchor = mem_pairs[-1]
        text = (
            f" In Redis a URL key takes {ours.usage / ours.n:.0f} bytes at {ours.n:,} keys "
            f"against {anchor.usage / anchor.n:.0f} for a SET of hex fingerprints"
        )
        small = mem_pairs[0][0]
        det = small.keys * ours.n - ours.keys * small.n
        if len(mem_pairs) > 1 and det:
            # usage = fixed * hashes + per_field * keys, solved from the two runs
            fixed = (small.usage * ours.n - ours.usage * small.n) / det
            per_field = (small.keys * ours.usage - ours.keys * small.usage) / det
            text += (
                f": each Redis hash costs a fixed ~{fixed:.0f} bytes (key name, object, "
                f"dict entry, listpack header) and each URL key in it ~{per_field:.0f} "
                f"more; a namespace spreads over up to 65,536 hashes, so the cost per key "
                f"falls as it fills ({small.usage / small.n:.0f} bytes at {small.n:,})"
            )
        parts.append(text + ".")
    parts.append(
        f" Opening an SQLite store reads every kept key into memory "
        f"({sqlite_res['open']:.2f} s for {args.sqlite_n:,}, {sqlite_res['size']:.0f} "
        f"bytes/key on disk)."
    )
    redis_items = content.get("Redis (loopback)")
    if redis_items:
        parts.append(
            f" In the content stage a kept item costs Redis 4 round trips (get_content, "
            f"the band lookup pipeline, add_content, the record pipeline), a near duplicate "
            f"3 (the third reads the candidates), an exact one 1, and redis-py builds a "
            f"16-command pipeline for the band "
            f"lookup and up to 17 for the record: {redis_items * 1e6:.0f} us/item against "
            f"{content['memory'] * 1e6:.0f} for memory; computing the fingerprints costs "
            f"{content['fingerprint'] * 1e6:.0f} us/item whatever the store."
        )
    print("".join(parts))


if __name__ == "__main__":
    sys.exit(main())
