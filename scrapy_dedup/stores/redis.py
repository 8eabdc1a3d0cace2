"""Dedup state in Redis, shared by every process of a crawl. No Scrapy import.

Layout (``P`` = ``<prefix>:<namespace>``; fields and values are raw bytes or
integers, never pickles, and nothing read back is evaluated):

============================  =========================================  ==================
key                           field -> value                             written with
============================  =========================================  ==================
``P:u:<top 16 bits, hex>``    low 48 bits of a URL key -> info (int)     HSETNX (Lua)
``P:c:<first byte, hex>``     16-byte text digest -> first URL           HSETNX (Lua)
``P:n:<index>:<byte, hex>``   band key + slot (0-7) -> 8-byte doc id       HSETNX
``P:d:<method>:<byte, hex>``  8-byte doc id -> fingerprint + URL         HSETNX
``P:f:<byte, hex>``           64-bit canonical key -> fingerprints       append (Lua)
``P:k:<top 16 bits, hex>``    low 48 bits of a filing key -> first page  HSETNX (Lua)
============================  =========================================  ==================

URL keys live in up to 65,536 small hashes, which Redis keeps as compact
listpacks until a hash passes ``hash-max-listpack-entries`` (128 by default:
about 8M URLs per namespace). Measured with ``MEMORY USAGE``: 26 bytes a URL at
1M URLs, 50 at 200k, 89 at 50k (each hash costs about 95 bytes of its own).
Every key name hashes to its own cluster slot (no ``{hash tag}``), so a
namespace spreads over all nodes of a Redis Cluster, and every script touches
one key.

Band keys are filed under the near-duplicate method's index name:
``minhash`` for the 16 bands of 4 rows of ``DEDUP_NEAR_THRESHOLD`` above
0.707, ``minhash-035x003`` (35 bands of 3 rows) for 0.5, and so on. Field
``near:<method>`` of ``P:run`` names the index the namespace's texts are in
(claimed with HSETNX when a crawl starts: for the index that already holds band
keys, if any, else for the worker's own). A worker whose layout is another one
refuses to start (:meth:`RedisStore.use_near`), and every lookup reads the
claim again in its own round trip (a DEDUP_RESET by another worker deletes
it): re-indexing while other workers write cannot be made safe, and a
namespace half in one index and half in another misses near duplicates
silently. ``text_version`` of ``P:run`` is the text normalization the
namespace's digests were made with; ``epoch``, ``writes``, ``writes:<worker>``
and ``trusted_since`` tell a server that lost data from a new namespace (see
"lost server state" below).

Atomicity: a URL key and a text digest are each set by one script on one key,
so when several workers record the same one at once exactly one wins. A near
duplicate lookup spans several bands (keys on several nodes): it is a read,
then a write. Two near duplicates recorded at the same moment by two workers
(within one round trip of each other) may therefore both be kept; an item is
never dropped unless the document it names was kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from scrapy_dedup.keys import PREVIOUS_RUN
from scrapy_dedup.stores.base import (
    FILED_LIMIT,
    Adoption,
    DedupStore,
    StoreError,
    redact,
    warn_old_fingerprints,
    warn_old_texts,
)
from scrapy_dedup.stores.compact import CompactMap
from scrapy_dedup.stores.memory import MemoryStore
from scrapy_dedup.text.clean import TEXT_VERSION
from scrapy_dedup.text.near import INDEX_SUFFIX_GLOB, doc_id, fitting_settings

if TYPE_CHECKING:
    import redis

    from scrapy_dedup.text.near import NearMethod

__all__ = ["RedisStore"]

logger = logging.getLogger(__name__)

# Record a value for a new field and answer nil, or answer the first value.
_SETNX_GET = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then return false end
return redis.call('HGET', KEYS[1], ARGV[1])
"""
# Append ARGV[2] to field ARGV[1] unless the value already holds ARGV[3] bytes.
_APPEND = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1 end
if #v + #ARGV[2] > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], v .. ARGV[2])
return 1
"""
# A URL key seen in run ARGV[3] (value "<info>:<run>"), or kept by a page
# (value "<info>:<run>:<unix time>"): answer the value when it counts for this
# run, "E" when a kept page's time ran out (ARGV[4]: the oldest that counts),
# else record ARGV[2] and answer nil. Keys only seen by an earlier run count
# for nothing: pages that gave no item are fetched by every run.
_ADD_URL = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  local run, kept = string.match(v, '^%d+:(%d+):?(%d*)$')
  if kept and kept ~= '' then
    if tonumber(kept) >= tonumber(ARGV[4]) then return v end
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    return 'E'
  end
  if run == ARGV[3] then return v end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return false
"""
# A text digest: a kept item's URL, or "\0<run>\0<URL>" ("\0<worker>" after
# it, for a worker holding a lease) while the item is on its way through the
# pipelines. An unconfirmed claim of an earlier run (that worker was killed
# before the item came out) counts for nothing; one of this run, once its
# worker's lease ran out (RedisStore._take_dead_claim).
_ADD_TEXT = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  if string.byte(v, 1) ~= 0 then return v end
  if string.match(v, '^%z(%d+)%z') == ARGV[3] then return v end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return false
"""
# Delete field ARGV[1] if it still holds ARGV[2].
_UNCLAIM = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
"""
# Start run ARGV[1] + 1 unless another worker started a run since run ARGV[1]
# was read: answer {run, 1 if this call started it}.
_NEW_RUN = """
local run = tonumber(redis.call('HGET', KEYS[1], 'run') or '0')
if run == tonumber(ARGV[1]) then
  return {redis.call('HINCRBY', KEYS[1], 'run', 1), 1}
end
return {run, 0}
"""
# Adopt the frontier rows (set KEYS[3]) of worker ARGV[1], whose lease
# KEYS[2] ran out, for the worker whose lease KEYS[5] holds (rows: KEYS[4]);
# take it off the run's workers (KEYS[1]). The workers the caller took over
# (set KEYS[7]) are that one and those it had taken over (KEYS[6]): the
# caller may die before it says so in the evidence log, and whoever adopts
# it then learns them here. Answer {rows' keys, the workers it had taken
# over}, or nil while its lease holds (or the caller's does not). One
# script: a row moves once.
_ADOPT = """
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[5]) == 0 then
  return false
end
local rows = redis.call('SMEMBERS', KEYS[3])
if #rows > 0 then
  redis.call('SUNIONSTORE', KEYS[4], KEYS[4], KEYS[3])
  redis.call('DEL', KEYS[3])
end
local took = redis.call('SMEMBERS', KEYS[6])
redis.call('SADD', KEYS[7], ARGV[1])
if #took > 0 then
  redis.call('SUNIONSTORE', KEYS[7], KEYS[7], KEYS[6])
  redis.call('DEL', KEYS[6])
end
redis.call('SREM', KEYS[1], ARGV[1])
return {rows, took}
"""
# Replace field ARGV[1]'s value ARGV[2] with ARGV[3]: 1 if it holds ARGV[3] now.
_SWAP = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v == ARGV[3] then return 1 end
if v ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""
# Doc ids per band key: fields <band key><slot>, each set once with HSETNX (a
# cluster pipeline cannot run scripts, and these need none).
_SLOTS = [bytes([slot]) for slot in range(8)]
_METHODS = ("minhash", "minhash2", "simhash")  # near-duplicate methods, for clear()
_LOW48 = (1 << 48) - 1


def _worker_name(base: str, pid: int) -> str:
    """The connection name of a worker of namespace ``base``: a digest of the
    namespace (names allow no spaces) and the process id."""
    return f"dedup-{_tag(base)}-{pid}"


def _glob(text: str) -> str:
    """``text`` escaped for a SCAN pattern (it matches only itself)."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def _tag(base: str) -> str:
    return hashlib.blake2b(base.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


class RedisStore(DedupStore):
    """A :class:`DedupStore` in Redis or a Redis Cluster (``client``)."""

    persistent = True
    persists_kept = True

    def __init__(
        self,
        client: Any,
        namespace: str,
        *,
        prefix: str = "dedup",
        uri: str = "",
        recrawl_after: float | None = None,
        worker: str | None = None,
        join: bool = True,
        state_dir: str | None = None,
        lease: float | None = None,
    ) -> None:
        import redis
        from redis.exceptions import RedisClusterException

        self._redis = redis
        # A cluster client raises RedisClusterException (not a RedisError in
        # redis-py 4-8) when no node answers, even mid-crawl.
        self._errors = (redis.RedisError, RedisClusterException)
        self.client = client
        self.uri = redact(uri) if uri else repr(client)
        self.namespace = namespace
        self.base = f"{prefix}:{namespace}"
        # First values already known (URL keys, claims): see _first().
        self._known = CompactMap()
        self._claimed = CompactMap()
        self._lookup: tuple[str, bytes, list[str], list[bytes | None]] | None = None
        self._indexed: set[str] = set()  # near-duplicate indexes checked by use_near()
        self.recrawl_after = recrawl_after
        self._expired: set[int] = set()
        # Written at flush(), frontier rows first: a page is kept only once the
        # requests it led to are in the frontier.
        self._adds: dict[int, str] = {}
        self._dones: set[int] = set()
        self._keeps: dict[int, bytes] = {}
        self._confirms: list[tuple[str, bytes, bytes]] = []
        self._counts = {"kept": 0, "texts": 0}
        self._holding: list[tuple[str, bytes, bytes, bytes]] | None = None
        self._kept = CompactMap()  # keys kept by this process in this run
        # Lost server state (see _check_epoch): the marker file of this
        # namespace under ``state_dir``, this worker's frontier rows (written
        # again if the server forgets them) and the write counters.
        self.state_dir = state_dir
        self.lost_state = 0  # times this worker found the server had lost data
        self._lost_mid_run = False
        self.on_lost_state: Callable[[], None] | None = None
        self._rows: dict[int, str] = {}
        self._epoch = b""
        self._writes = 0  # this worker's write counter, as the server last answered
        self._total_writes = 0
        self._trusted_since = 0  # pages kept before this time count for nothing
        # Leases (see keep_lease): seconds a lease lasts, whether this worker
        # holds one, and adopted keys add_url lets through once.
        self.lease = lease
        self._leased = False
        self._adopted: set[int] = set()
        self._owning: set[int] = set()  # rows of requests this worker fetches (own_row)
        # The evidence log's record just before the position this worker read
        # up to (see exchange_evidence), and that position.
        self._evidence_tail: bytes | None = None
        self._evidence_at = 0
        name = worker or f"{_worker_name(self.base, os.getpid())}-{os.urandom(4).hex()}"
        self.worker: str = name
        pool = getattr(client, "connection_pool", None)
        if pool is not None and pool.connection_kwargs.get("client_name") != self.worker:
            pool.connection_kwargs["client_name"] = self.worker  # a client made elsewhere
            pool.disconnect()
        try:
            client.ping()
            self._setnx_get = client.register_script(_SETNX_GET)
            self._append = client.register_script(_APPEND)
            self._add_url = client.register_script(_ADD_URL)
            self._add_text = client.register_script(_ADD_TEXT)
            self._unclaim = client.register_script(_UNCLAIM)
            self._new_run = client.register_script(_NEW_RUN)
            self._adopt = client.register_script(_ADOPT)
            self._swap = client.register_script(_SWAP)
            self._check_epoch(join)
            self._join(join)
            self._note_epoch(join)
        except self._errors as exc:
            # Our message says it all: no chained redis-py traceback in the log.
            raise StoreError(f"cannot reach the dedup store at {self.uri}: {exc}") from None

    @classmethod
    def from_uri(
        cls,
        uri: str,
        namespace: str,
        *,
        jobdir: str | None = None,
        prefix: str = "dedup",
        timeout: float = 0.5,
        recrawl_after: float | None = None,
        join: bool = True,
        state_dir: str | None = None,
        lease: float | None = None,
    ) -> RedisStore:
        """A store for ``redis://``, ``rediss://``, ``unix://`` or
        ``redis+cluster://`` (``rediss+cluster://``) URIs, which must name
        their host (or socket path). Each connect and each reply waits at most
        ``timeout`` seconds (``DEDUP_STORE_TIMEOUT``): the calls run on
        Scrapy's reactor thread, so a frozen server stalls the whole crawl.
        ``state_dir`` (else ``jobdir``) keeps a small marker file saying this
        namespace existed, so that a server that forgot it is noticed."""
        import redis
        from redis.backoff import NoBackoff
        from redis.cluster import RedisCluster
        from redis.exceptions import RedisClusterException
        from redis.retry import Retry

        worker = f"{_worker_name(f'{prefix}:{namespace}', os.getpid())}-{os.urandom(4).hex()}"
        # No retries inside redis-py: its default ones back off for seconds on
        # Scrapy's reactor thread, and a retried check-and-set whose first reply
        # was lost would read back its own write as another worker's. The store
        # retries once itself (_call, _set_first), knowing which calls it may.
        options = {
            "socket_connect_timeout": timeout,
            "socket_timeout": timeout,
            "health_check_interval": 30,
            "retry": Retry(NoBackoff(), 0),
            # How workers of one run see each other (see _join): a killed
            # worker's connections close with it.
            "client_name": worker,
        }
        uri = uri.strip()
        parts = urlsplit(uri)
        if not (parts.hostname or (parts.scheme == "unix" and parts.path)):
            raise ValueError(
                f"DEDUP_STORE={redact(uri)!r} names no server: write the host, e.g. "
                "redis://localhost:6379/0"
            )
        try:
            if parts.scheme.endswith("+cluster"):
                plain = urlunsplit(parts._replace(scheme=parts.scheme.split("+")[0]))
                client: Any = RedisCluster.from_url(plain, **options)
            else:
                client = redis.Redis.from_url(uri, **options)
        except (redis.RedisError, RedisClusterException) as exc:  # a cluster client connects
            raise StoreError(f"cannot reach the dedup store at {redact(uri)}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"DEDUP_STORE={redact(uri)!r}: {exc}") from exc
        return cls(
            client,
            namespace,
            prefix=prefix,
            uri=uri,
            recrawl_after=recrawl_after,
            worker=worker,
            join=join,
            state_dir=state_dir or jobdir,
            lease=lease,
        )

    def ping(self) -> None:
        self._call("answer", self.client.ping)

    def fallback(self) -> MemoryStore:
        """A memory store that shares (not copies) the URL keys and claims
        this process knows: while Redis is down it answers for them, and what
        it records lands in the same maps, so this worker fetches no page
        twice, during the outage or after it. Sharing costs no memory and
        needs no refresh; Redis never learns the keys recorded meanwhile."""
        local = MemoryStore()
        local._urls, local._claims = self._known, self._claimed
        return local

    def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, tried again once after a connection
        error (a dropped idle connection fails at once); only for calls safe to
        repeat. Never after a timeout: a frozen server would stall twice."""
        redis = self._redis
        try:
            try:
                return function(*args, **kwargs)
            except redis.ConnectionError:
                return function(*args, **kwargs)
        except self._errors as exc:
            raise StoreError(f"dedup store {self.uri} failed to {what}: {exc}") from exc

    def _pipe(self, what: str, fill: Callable[[Any], object]) -> list[Any]:
        """The answers to the commands ``fill`` puts in a pipeline, tried again
        once after a connection error in a new pipeline (an executed
        pipeline is empty: retrying it would answer nothing, and write nothing)."""

        def run() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            fill(pipe)
            answers: list[Any] = pipe.execute()
            return answers

        return self._call(what, run)  # type: ignore[no-any-return]

    def _set_first(
        self,
        what: str,
        name: str,
        field: bytes,
        value: bytes,
        script: Any = None,
        *extra: Any,
    ) -> bytes | None:
        """Set ``field`` unless it is set (``script``: a check-and-set taking
        field, value and ``extra``; by default HSETNX); ``None`` when this call
        set it, else the first value. Exactly one of several racing callers
        gets ``None``."""
        redis = self._redis
        script = script or self._setnx_get
        args = [field, value, *extra]
        try:
            try:
                found: bytes | None = script(keys=[name], args=args)
                return found
            except redis.ConnectionError:  # not after a timeout: see _call()
                # The first try may have run with its reply lost: finding our own
                # value now most likely means we set it (an identical value
                # written by another worker at that very moment is a duplicate
                # fetch, never a lost page).
                first = script(keys=[name], args=args)
                return None if first == value else first
        except self._errors as exc:
            raise StoreError(f"dedup store {self.uri} failed to {what}: {exc}") from exc

    # -- URL keys ----------------------------------------------------------

    def _slot(self, kind: str, key: int) -> tuple[str, bytes]:
        """Where a 64-bit key of ``kind`` ("u" URL keys, "k" claims) lives:
        one of 65,536 small hashes, its low 48 bits the field."""
        return f"{self.base}:{kind}:{key >> 48:04x}", (key & _LOW48).to_bytes(6, "little")

    def _first(self, kind: str, cache: CompactMap, key: int, value: int, what: str) -> int | None:
        """Record ``value`` for a new ``key``: ``None``, else the first value.
        A key's first value never changes, so answers are cached: a link
        repeated on every page costs one round trip per worker, not per page."""
        known = cache.get(key)
        if known is not None:
            return known
        name, field = self._slot(kind, key)
        first = self._set_first(what, name, field, str(value).encode())
        found = value if first is None else int(first)
        cache.setdefault(key, found)
        return None if first is None else found

    def add_url(self, key: int, info: int) -> int | None:
        if key in self._adopted:  # seen by a worker that died before it was done
            self._adopted.discard(key)
            self._known.setdefault(key, info)
            return None
        known = self._known.get(key)
        if known is not None:
            return known
        name, field = self._slot("u", key)
        value = b"%d:%s" % (info, self._run_bytes)
        found = self._set_first(
            "record a URL", name, field, value, self._add_url, self._run_bytes, self._oldest()
        )
        if found is None or found == b"E":
            if found == b"E":  # kept by an earlier run, past DEDUP_RECRAWL_AFTER
                self._expired.add(key)
            self._known.setdefault(key, info)
            return None
        first = self._info(found)
        self._known.setdefault(key, first)
        return first

    def get_url(self, key: int) -> int | None:
        known = self._known.get(key)
        if known is not None:
            return known
        name, field = self._slot("u", key)
        value = self._call("read a URL", self.client.hget, name, field)
        if value is None:
            return None
        _, _, rest = value.partition(b":")
        run, _, kept = rest.partition(b":")
        if (int(kept) < self._oldest()) if kept else run != self._run_bytes:
            if kept and not self._join_run:  # a tool asks: what will the next run do?
                self._expired.add(key)
            return None  # counts for nothing in this run
        first = self._info(value)
        self._known.setdefault(key, first)
        return first

    def _info(self, value: bytes) -> int:
        """The info word of a stored URL value; ``PREVIOUS_RUN`` for a page
        an earlier run kept."""
        info, _, rest = value.partition(b":")
        run, _, kept = rest.partition(b":")
        return int(info) | (PREVIOUS_RUN if kept and run != self._run_bytes else 0)

    def _oldest(self) -> int:
        """The oldest time a kept page counts from (DEDUP_RECRAWL_AFTER)."""
        # A forgotten page is marked kept at time 1: always past.
        oldest = 2 if self.recrawl_after is None else int(time.time() - self.recrawl_after)
        return max(oldest, self._trusted_since)  # pages kept before a data loss: see _lost()

    def keep_url(self, key: int, info: int, url: str | None = None) -> None:
        known = self._known.get(key)
        if (known is not None and known & PREVIOUS_RUN) or key in self._kept:
            return  # kept already
        self._kept.setdefault(key, 1)
        info = (known if known is not None else info) & ~PREVIOUS_RUN
        self._keeps[key] = b"%d:%s:%d" % (info, self._run_bytes, int(time.time()))
        self._counts["kept"] += 1
        self._due()

    def expired(self, key: int) -> bool:
        return key in self._expired

    # -- runs and the frontier ---------------------------------------------

    def _join(self, join: bool = True) -> None:
        """Join the run of the workers connected now, or start a new one.

        A run is the time some worker of the namespace is connected: URL keys
        seen in it are shared by all its workers; kept pages count for every
        later run. A worker starting alone (the others finished or were
        killed: their connections closed with them) starts a new run and
        feeds it the frontier earlier runs left unfinished. With ``join=False``
        (a tool such as ``scrapy dedup forget``) it only reads the run number."""
        self._run_key = run_key = f"{self.base}:run"
        self.run, self.new_run = int(self.client.hget(run_key, "run") or 0), False
        if join:
            self._join_or_start()
            self.client.hset(run_key, f"w:{self.worker}", self.run)
        else:
            self._look_as_a_new_worker()
        self._join_run = join
        self._run_bytes = str(self.run).encode()
        peers = self._peers()
        kept, texts, version = self.client.hmget(self._run_key, ["kept", "texts", "text_version"])
        if join:
            self._note_text_version(int(texts or 0), int(version or 1))
        names = self._pending_names()
        pending = sum(self._pipe("count the frontier", lambda p: [p.hlen(n) for n in names]))
        joined = f"joined run {self.run} of {len(peers)} running workers"
        self._summary = (
            f"{self.uri}, namespace {self.namespace!r}: "
            f"{'started run ' + str(self.run) if self.new_run else joined}; "
            f"{int(kept or 0)} pages kept and {int(texts or 0)} texts recorded by all runs, "
            f"{pending} unfinished requests{' to resume' if self.new_run else ''}"
        )

    def _peer_runs(self) -> tuple[list[str], list[int]]:
        """The workers connected now, and the runs they noted they are in
        (``w:<name>``)."""
        peers = self._peers()
        if not peers:
            return peers, []
        noted = self.client.hmget(self._run_key, [f"w:{peer}" for peer in peers])
        return peers, [int(run) for run in noted if run is not None]

    def _join_or_start(self) -> None:
        """Join the run of the workers connected now, or start the next one."""
        for attempt in range(30):
            current = int(self.client.hget(self._run_key, "run") or 0)
            # A worker that started a moment ago may not have noted its run
            # yet: wait for it rather than guess.
            peers, runs = self._peer_runs()
            if runs:
                self.run = max(runs)
                return
            if not peers or attempt == 29:
                # Start the next run, or join the one another worker started
                # since ``current`` was read.
                run, started = self._new_run(keys=[self._run_key], args=[current])
                self.run, self.new_run = int(run), bool(started)
                return
            time.sleep(0.1)

    def _look_as_a_new_worker(self) -> None:
        """A tool looks as a worker starting now would: in the run of the
        workers crawling now, else in a new run (the last run's pages count as
        kept by an earlier run, its frontier waits to resume)."""
        _, runs = self._peer_runs()
        if runs:
            self.run = max(runs)
        else:
            self.run, self.new_run = self.run + 1, True

    def _note_text_version(self, texts: int, version: int) -> None:
        """Warn about texts of an older normalization (those recorded before
        it was versioned are version 1), and note this one."""
        if texts and version < TEXT_VERSION:
            warn_old_texts(f"{self.uri}, namespace {self.namespace!r}", version, TEXT_VERSION)
        self.client.hset(self._run_key, "text_version", TEXT_VERSION)

    def _peers(self) -> list[str]:
        """The other workers of this namespace connected now (by connection name)."""
        prefix = self.worker.rsplit("-", 1)[0].rsplit("-", 1)[0] + "-"
        try:
            if hasattr(self.client, "get_node_from_key"):  # a cluster: the run's node
                node = self.client.get_node_from_key(self._run_key)
                listing: Any = self.client.client_list(target_nodes=node)
            else:
                listing = self.client.client_list()
        except self._redis.ResponseError:  # CLIENT LIST not allowed: act alone
            logger.warning(
                "%s does not allow CLIENT LIST: this worker cannot see others and "
                "starts a run of its own",
                self.uri,
            )
            return []
        if isinstance(listing, dict):
            listing = [entry for entries in listing.values() for entry in entries]
        names = {entry.get("name", "") for entry in listing}
        return sorted(n for n in names if n.startswith(prefix) and n != self.worker)

    def describe(self) -> str:
        return self._summary

    keeps_evidence = True

    def exchange_evidence(self, records: list[str], start: int) -> tuple[list[str], int]:
        # One list: every worker reads it in the order Redis appended it.
        # Appending again after a lost reply only repeats records, which the
        # learner ignores (a page it already has, a declaration it knows).
        # Positions are list indexes: a list that lost records (a manual DEL or
        # LTRIM, a failover to a replica that missed the last writes) would make
        # this worker skip what comes next at its old position. So each read
        # also checks that the record before the position is still the one read
        # there, and reads the whole log again if not (repeats change nothing).
        name = f"{self.base}:learn"
        check = start > 0 and start == self._evidence_at and self._evidence_tail is not None

        def exchange(pipe: Any) -> None:
            if records:
                pipe.rpush(name, *(r.encode("utf-8", "surrogatepass") for r in records))
            if check:
                pipe.lindex(name, start - 1)
            pipe.lrange(name, start, -1)

        answers = self._pipe("exchange learned-rule evidence", exchange)
        found: list[bytes] = answers[-1]
        if check and answers[-2] != self._evidence_tail:
            logger.warning(
                "The learned-rule evidence log %s at %s lost records this worker had "
                "read (deleted, trimmed, or a failover to a replica that missed them): "
                "reading it again from the start",
                name,
                self.uri,
            )
            found = self._pipe("read learned-rule evidence", lambda p: p.lrange(name, 0, -1))[-1]
            start = 0
        if found:
            self._evidence_tail = found[-1]
        self._evidence_at = start + len(found)
        # (A record another program wrote that is not UTF-8 is read, and skipped as unreadable.)
        return [r.decode("utf-8", "replace") for r in found], self._evidence_at

    def _pending_names(self) -> list[str]:
        return [f"{self.base}:p:{byte:02x}" for byte in range(256)]

    def _pending_slot(self, key: int) -> tuple[str, bytes]:
        return f"{self.base}:p:{key >> 56:02x}", key.to_bytes(8, "little")

    def add_pending(self, key: int, request: str) -> None:
        self._rows[key] = request
        self._dones.discard(key)
        self._adds[key] = request
        self._due()

    def done_pending(self, key: int) -> None:
        self._rows.pop(key, None)
        self._adds.pop(key, None)
        self._dones.add(key)
        self._due()

    def pending_requests(self) -> list[tuple[int, str]]:
        """What earlier runs left unfinished, for the worker that starts a run."""
        if not self.new_run:
            return []
        names = self._pending_names()
        found = self._pipe("read the frontier", lambda p: [p.hgetall(n) for n in names])
        restored = [
            (int.from_bytes(field, "little"), value.decode("utf-8", "surrogatepass"))
            for rows in found
            for field, value in rows.items()
        ]
        self._own_restored([key for key, _ in restored])
        return restored

    # -- leases ---------------------------------------------------------------
    #
    # A worker that crawls holds a lease, P:w:{<tag>}:<run>:<worker>:lease, a
    # key that expires DEDUP_REDIS_LEASE seconds after its last renewal, and
    # owns the frontier rows it wrote (the set ...:<worker>:rows, beside the
    # run's workers, the set P:w:{<tag>}:<run>). The hash tag keeps a run's
    # lease keys on one cluster node, so one script moves the rows of a worker
    # whose lease ran out to a live worker: each row goes to one adopter.

    @property
    def lease_interval(self) -> float | None:  # type: ignore[override]
        """Seconds between renewals (a quarter of the lease), for a worker of a run."""
        return self.lease / 4 if self.lease and self._join_run else None

    def _lease_base(self, run: int | None = None) -> str:
        """The set of a run's workers; the prefix of their lease keys."""
        return f"{self.base}:w:{{{_tag(self.base)}}}:{self.run if run is None else run}"

    def _lease_key(self, worker: str, run: int | None = None) -> str:
        return f"{self._lease_base(run)}:{worker}:lease"

    def _rows_key(self, worker: str, run: int | None = None) -> str:
        return f"{self._lease_base(run)}:{worker}:rows"

    def _took_key(self, worker: str, run: int | None = None) -> str:
        """The workers of the run ``worker`` took over (:meth:`adopt`)."""
        return f"{self._lease_base(run)}:{worker}:took"

    def keep_lease(self) -> None:
        """Take or renew this worker's lease. A renewal that finds it ran out
        (the reactor or Redis stalled longer than the lease) says so: other
        workers may have adopted requests this one still crawls."""
        if self.lease_interval is None or self.lease is None:
            return
        lease, ttl = self._lease_key(self.worker), max(1, int(self.lease * 1000))

        def renew(pipe: Any) -> None:
            pipe.pttl(lease)
            pipe.set(lease, b"1", px=ttl)
            pipe.sadd(self._lease_base(), self.worker)

        left = self._pipe("renew the worker's lease", renew)[0]
        if not self._leased:
            self._leased = True
            if self.new_run:
                self._drop_leases(self.run - 1)
        elif left == -2:
            logger.warning(
                "This worker's lease in %s ran out (it could not renew it for "
                "DEDUP_REDIS_LEASE=%s s): other workers may have adopted requests it "
                "still crawls, which are then fetched twice",
                self.uri,
                self.lease,
            )

    def _drop_leases(self, run: int) -> None:
        """Delete the lease keys of an earlier run (this worker restored its frontier)."""
        if run < 1:
            return
        base = self._lease_base(run)
        workers = self._call("read the last run's workers", self.client.smembers, base)

        def drop(pipe: Any) -> None:
            for worker in workers:
                name = worker.decode("utf-8", "replace")
                pipe.delete(self._lease_key(name, run))
                pipe.delete(self._rows_key(name, run))
                pipe.delete(self._took_key(name, run))
            pipe.delete(base)

        self._pipe("forget the last run's leases", drop)

    def release_lease(self) -> None:
        """Give the lease up (the worker stops): rows it leaves are adopted
        by the workers still crawling at their next check."""
        if self._leased:
            self._leased = False
            self._call(
                "release the worker's lease", self.client.delete, self._lease_key(self.worker)
            )

    def _own_rows(self, pipe: Any, keys: Iterable[int]) -> None:
        """Record new frontier rows as this worker's (before the rows: a key
        without its row is dropped by an adopter, a row without its owner
        would wait for the next run)."""
        if self._leased and keys:
            pipe.sadd(self._rows_key(self.worker), *(key.to_bytes(8, "little") for key in keys))
            pipe.sadd(self._lease_base(), self.worker)  # it may have been adopted meanwhile

    def own_row(self, key: int) -> None:
        # Written with the next batch of writes (each response brings some),
        # never in a round trip of its own.
        if self._leased:
            self._owning.add(key)

    def _disown_rows(self, pipe: Any, keys: Iterable[int]) -> None:
        if self._leased and keys:
            pipe.srem(self._rows_key(self.worker), *(key.to_bytes(8, "little") for key in keys))

    def _own_restored(self, keys: list[int]) -> None:
        """The worker that starts a run owns the rows it restores."""
        if not self._leased or not keys:
            return
        name = self._rows_key(self.worker)
        chunks = [keys[i : i + 10_000] for i in range(0, len(keys), 10_000)]
        self._pipe(
            "own the restored frontier",
            lambda p: [p.sadd(name, *(k.to_bytes(8, "little") for k in c)) for c in chunks],
        )

    def adopt(self) -> list[Adoption]:
        """Take over the workers of this run whose lease ran out (killed, or
        stopped): their rows, and an :class:`Adoption` for each, with no rows
        for one that left none (what it skipped is owed here all the same)."""
        if not self._leased:
            return []
        base = self._lease_base()
        names = self._call("read the run's workers", self.client.smembers, base)
        others = sorted(n.decode("utf-8", "replace") for n in names)
        others = [name for name in others if name != self.worker]
        if not others:
            return []
        alive = self._pipe(
            "read the workers' leases", lambda p: [p.exists(self._lease_key(w)) for w in others]
        )
        mine = [base, self._rows_key(self.worker), self._lease_key(self.worker)]
        adoptions = []
        for worker, live in zip(others, alive, strict=True):
            if live:
                continue
            # Not retried after a lost reply (_call would): the rows would be
            # ours already, and a second try would answer none of them.
            try:
                taken = self._adopt(
                    keys=[
                        base,
                        self._lease_key(worker),
                        self._rows_key(worker),
                        *mine[1:],
                        self._took_key(worker),
                        self._took_key(self.worker),
                    ],
                    args=[worker],
                )
            except self._errors as exc:
                raise StoreError(f"dedup store {self.uri} failed to adopt rows: {exc}") from exc
            if taken is None:
                continue  # its lease holds after all (or ours ran out)
            # Taken over, rows or none: what it skipped is ours too, and what
            # the workers it took over skipped (it may have died before it
            # said so in the evidence log).
            keys, took = taken
            rows = self._adopted_rows(keys) if keys else []
            names = sorted(name.decode("utf-8", "replace") for name in took)
            adoptions.append(Adoption(worker, rows, tuple(names)))
        return adoptions

    def _adopted_rows(self, fields: list[bytes]) -> list[tuple[int, str]]:
        """The rows of adopted keys; keys whose row is gone (done) are dropped."""
        slots = [self._pending_slot(int.from_bytes(field, "little")) for field in fields]
        texts = self._pipe("read adopted rows", lambda p: [p.hget(*slot) for slot in slots])
        gone = [field for field, text in zip(fields, texts, strict=True) if text is None]
        if gone:
            self._call("drop done rows", self.client.srem, self._rows_key(self.worker), *gone)
        return [
            (int.from_bytes(field, "little"), text.decode("utf-8", "surrogatepass"))
            for field, text in zip(fields, texts, strict=True)
            if text is not None
        ]

    def _take_dead_claim(
        self, name: str, digest: bytes, claim: bytes, value: bytes
    ) -> bytes | None:
        """A text claimed in this run by a worker whose lease ran out: its
        item may never have come out (killed in its pipelines), and the page
        is adopted and fetched again. Take the claim over (``None``), as a
        later run would: an item out in both rather than in none. Else
        ``claim``: a live worker's item on its way."""
        if not self._claimed_by_the_dead(claim):
            return claim
        swapped = self._call(
            "take over a text claim", self._swap, keys=[name], args=[digest, claim, value]
        )
        return None if swapped else claim

    def _claimed_by_the_dead(self, claim: bytes) -> bool:
        """Whether ``claim`` ("\0<run>\0<URL>\0<worker>") was made in this run
        by another worker whose lease ran out."""
        parts = claim.split(b"\0", 3)
        if not self._leased or len(parts) < 4 or parts[1] != self._run_bytes:
            return False
        worker = parts[3].decode("utf-8", "replace")
        if worker == self.worker:
            return False
        lease = self._lease_key(worker)
        return not self._call("read a worker's lease", self.client.exists, lease)

    def readmit(self, key: int) -> None:
        self._adopted.add(key)

    def readmit_link(self, key: int) -> None:
        if key in self._kept:
            return
        slot = self._slot("u", key)
        value, pending = self._pipe(
            "read a link of an adopted page",
            lambda p: (p.hget(*slot), p.hexists(*self._pending_slot(key))),
        )
        if value is None or pending:
            return  # new: the filter lets it through anyway; or a worker has it
        _, _, rest = value.partition(b":")
        run, _, kept = rest.partition(b":")
        if run == self._run_bytes and not kept:  # seen in this run, never done for good
            self._adopted.add(key)

    def awaiting_adoption(self) -> bool:
        """Whether a worker of this run left rows and is no longer connected
        (killed, or stopped) while its lease still holds."""
        if not self._leased:
            return False
        names = self._call("read the run's workers", self.client.smembers, self._lease_base())
        others = {n.decode("utf-8", "replace") for n in names} - {self.worker}
        gone = sorted(others - set(self._peers())) if others else []
        if not gone:
            return False
        sizes = self._pipe(
            "count the rows of gone workers", lambda p: [p.scard(self._rows_key(w)) for w in gone]
        )
        return any(sizes)

    def _due(self) -> None:
        if self.flush_due is not None:
            self.flush_due()
        else:
            self.flush()

    def flush(self) -> None:
        """Write what waits: the frontier's new rows first, then the kept
        pages, finished requests, confirmed texts and counters (a kill -9
        between the two leaves rows for requests already done, which the
        next run fetches once more, never a kept page whose links are lost)."""
        if self._adds:
            adds = self._adds

            def frontier(pipe: Any) -> None:
                self._own_rows(pipe, [*adds, *self._owning])
                for key, request in adds.items():
                    pipe.hset(*self._pending_slot(key), request.encode("utf-8", "surrogatepass"))
                self._stamp(pipe)

            self._stamped(self._pipe("write the frontier", frontier))
            self._adds = {}
            self._owning.clear()
        counts = {name: n for name, n in self._counts.items() if n}
        if not (self._keeps or self._dones or self._confirms or counts):
            return

        def records(pipe: Any) -> None:
            self._own_rows(pipe, self._owning)  # before the done rows: they may be among them
            for key, value in self._keeps.items():
                pipe.hset(*self._slot("u", key), value)
            for key in self._dones:
                pipe.hdel(*self._pending_slot(key))
            self._disown_rows(pipe, self._dones)
            for name, digest, url in self._confirms:
                pipe.hset(name, digest, url)
            for name, n in counts.items():
                pipe.hincrby(self._run_key, name, n)
            self._stamp(pipe)

        self._stamped(self._pipe("record kept pages", records))
        self._owning.clear()
        self._keeps.clear()
        self._dones.clear()
        self._confirms.clear()
        self._counts = dict.fromkeys(self._counts, 0)

    def forget(
        self,
        keys: Iterable[int] = (),
        prefix: str | None = None,
        key_of: Callable[[str], int] | None = None,
    ) -> list[str]:
        """Forget the pages of ``keys``, and (with ``key_of``, the key of a
        URL) those of kept texts whose URL starts with ``prefix``."""
        targets = {key: f"key {key:016x}" for key in keys}
        if prefix and key_of is not None:
            names = [f"{self.base}:c:{byte:02x}" for byte in range(256)]
            for values in self._pipe("read texts", lambda p: [p.hvals(n) for n in names]):
                for value in values:
                    url = self._text_url(value)
                    if url.startswith(prefix):
                        targets[key_of(url)] = url
        slots = [self._slot("u", key) for key in targets]
        values = self._pipe("read pages", lambda p: [p.hget(*slot) for slot in slots])
        # Marked kept at time 1 (always past), not deleted: the next run
        # fetches the page again and compares its text (``expired``).
        marks = [
            (slot, b"%s:0:1" % value.partition(b":")[0])
            for slot, value in zip(slots, values, strict=True)
            if value is not None and value.count(b":") == 2 and not value.endswith(b":1")
        ]
        self._pipe("forget pages", lambda p: [p.hset(*slot, mark) for slot, mark in marks])
        found = {slot for slot, _ in marks}
        return [url for slot, url in zip(slots, targets.values(), strict=True) if slot in found]

    def inventory(self, top: int = 10) -> dict[str, Any]:
        """Counts, and the hosts of kept texts' URLs (the URL keys keep no URL)."""
        texts = [f"{self.base}:c:{byte:02x}" for byte in range(256)]
        pending = self._pending_names()
        text_count = sum(self._pipe("count texts", lambda p: [p.hlen(n) for n in texts]))
        counts = {
            "URL keys": self.url_count(),
            "texts (exact digests)": text_count,
            "unfinished requests (frontier)": sum(
                self._pipe("count the frontier", lambda p: [p.hlen(n) for n in pending])
            ),
            "learned-rule evidence records": int(
                self._call("count evidence", self.client.llen, f"{self.base}:learn")
            ),
        }
        hosts: Counter[str] = Counter()
        for name in texts:
            for value in self._call("read texts", self.client.hvals, name):
                hosts[urlsplit(self._text_url(value)).hostname or "(none)"] += 1
        hosts_of = [list(pair) for pair in hosts.most_common(top)]
        return {"counts": counts, "hosts": hosts_of, "hosts_of": "kept texts"}

    def url_count(self) -> int:
        """Every URL key of the namespace (scans 65,536 hashes: for tests and tools)."""
        names = [f"{self.base}:u:{bucket:04x}" for bucket in range(1 << 16)]
        return sum(self._pipe("count URLs", lambda p: [p.hlen(n) for n in names]))

    # -- content -----------------------------------------------------------

    def _content_key(self, digest: bytes) -> str:
        return f"{self.base}:c:{digest[0]:02x}"

    def get_content(self, digest: bytes) -> str | None:
        value = self._call(
            "read a text digest", self.client.hget, self._content_key(digest), digest
        )
        if value is None or (value[:1] == b"\0" and value.split(b"\0")[1] != self._run_bytes):
            return None  # a claim of an earlier run whose item never came out
        if value[:1] == b"\0" and self._claimed_by_the_dead(value):
            return None  # ... or of a worker of this run that died since
        return self._text_url(value)

    def add_content(self, digest: bytes, url: str) -> str | None:
        name = self._content_key(digest)
        text_url = url.encode("utf-8", "surrogatepass")
        # Inside hold(): claimed for this run only, until the item is out.
        value = text_url if self._holding is None else b"\0%s\0%s" % (self._run_bytes, text_url)
        if self._holding is not None and self._leased:  # the claimer: see _take_dead_claim
            value += b"\0" + self.worker.encode()
        first = self._set_first(
            "record a text digest", name, digest, value, self._add_text, self._run_bytes
        )
        if first is not None and first[:1] == b"\0":
            first = self._take_dead_claim(name, digest, first, value)
        if first is not None:
            return self._text_url(first)
        if self._holding is None:
            self._counts["texts"] += 1
        else:
            self._holding.append((name, digest, text_url, value))
        return None

    @staticmethod
    def _text_url(value: bytes) -> str:
        if value[:1] == b"\0":  # "\0<run>\0<URL>", "\0<worker>" after it since leases
            value = value.split(b"\0", 3)[2]
        return value.decode("utf-8", "surrogatepass")

    def release(self, token: Any) -> None:
        """The item is out of the pipelines: its texts are kept for good."""
        for name, digest, url, _ in token or ():
            self._confirms.append((name, digest, url))
            self._counts["texts"] += 1
        if token:
            self._due()

    def discard(self, token: Any) -> None:
        """The item was dropped later: its texts are not kept after all."""
        for name, digest, _, value in token or ():
            self._call("forget a text digest", self._unclaim, keys=[name], args=[digest, value])

    def _bands(self, method: NearMethod, fingerprint: Any) -> list[tuple[str, bytes]]:
        """Where the band keys of ``fingerprint`` live: (hash name, field prefix)."""
        index = f"{self.base}:n:{method.index_name}"
        # One of 256 hashes, by the key's low byte; by its top byte in the
        # indexes named as before (the top byte of a MinHash band key is
        # mostly its band's number: 16 hashes of 256 hold all 16 bands).
        shift = 56 if method.index_name == method.name else 0
        return [
            (f"{index}:{(band >> shift) & 0xFF:02x}", band.to_bytes(8, "little"))
            for band in method.band_keys(fingerprint)
        ]

    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        if method.index_name not in self._indexed:
            self.use_near(method)
        encoded = method.encode(fingerprint)
        bands = self._bands(method, fingerprint)
        bands_fields = [(name, [field + slot for slot in _SLOTS]) for name, field in bands]
        candidates: dict[bytes, None] = {}
        free: list[bytes | None] = []  # per band: the first free slot's field

        def lookup(pipe: Any) -> None:
            for name, fields in bands_fields:
                pipe.hmget(name, fields)
            # The claim, checked in the same round trip: a DEDUP_RESET by
            # another worker deletes it, a worker with other settings may take it.
            pipe.hget(self._run_key, f"near:{method.name}")

        answers = self._pipe("look up near duplicates", lookup)
        claim = answers.pop()
        if claim is None:  # reset meanwhile: claim the layout again
            claim = self._claim_layout(method, method.index_name)
        if claim != method.index_name.encode():
            self._indexed.discard(method.index_name)
            raise StoreError(self._refusal(method, claim.decode("utf-8", "replace")))
        for (_, field), values in zip(bands, answers, strict=True):
            free.append(
                next((field + s for s, v in zip(_SLOTS, values, strict=True) if v is None), None)
            )
            for value in values:
                if value is not None:
                    candidates[value] = None
        # add_near() usually follows at once: it reuses what this lookup found.
        self._lookup = (method.index_name, encoded, [n for n, _ in bands], free)
        if not candidates:
            return None
        docs = [(self._doc_key(method, c), c) for c in candidates]
        others: list[Any] = []
        urls: list[str] = []
        for value in self._pipe(
            "read near-duplicate candidates", lambda p: [p.hget(n, c) for n, c in docs]
        ):
            if value is None or len(value) < len(encoded):
                continue
            try:
                others.append(method.decode(value[: len(encoded)]))
            except ValueError:
                continue
            urls.append(value[len(encoded) :].decode("utf-8", "replace"))
        # One decision over every candidate: the bar accounts for how many.
        found = method.best_match(fingerprint, others)
        return None if found is None else (urls[found[0]], found[2])

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        encoded = method.encode(fingerprint)
        lookup = self._lookup
        if lookup is None or lookup[0] != method.index_name or lookup[1] != encoded:
            self.match_near(method, fingerprint)
            lookup = self._lookup
        assert lookup is not None
        self._lookup = None
        _, _, names, free = lookup
        mine = doc_id(encoded)
        doc = encoded + url.encode("utf-8", "surrogatepass")

        def record(pipe: Any) -> None:
            # The same text reached again keeps its first URL (HSETNX).
            pipe.hsetnx(self._doc_key(method, mine), mine, doc)
            for name, slot in zip(names, free, strict=True):
                if slot is not None:  # else the band key is shared by _SLOTS documents already
                    pipe.hsetnx(name, slot, mine)

        self._pipe("record a near-duplicate fingerprint", record)

    def _doc_key(self, method: NearMethod, doc: bytes) -> str:
        return f"{self.base}:d:{method.name}:{doc[0]:02x}"

    def use_near(self, method: NearMethod) -> None:
        """Claim the namespace's near-duplicate index for ``method``'s layout,
        or raise :class:`StoreError` when its texts are in another one (an
        earlier run or another worker used another ``DEDUP_NEAR_THRESHOLD``
        or ``DEDUP_SIMHASH_MAX_DISTANCE``). Every lookup checks the claim
        again, in its own round trip."""
        field = f"near:{method.name}"
        raw = self._call("read the near-duplicate index", self.client.hget, self._run_key, field)
        if raw is None:
            # Unclaimed: a new namespace, one written before claims were
            # recorded, or one another worker is resetting. The index that
            # holds band keys is the one in use.
            raw = self._claim_layout(method, self._index_in_use(method) or method.index_name)
            if method.name == "minhash2" and self._call(
                "look for near-duplicate texts",
                self._first_key,
                _glob(f"{self.base}:d:minhash:") + "[0-9a-f][0-9a-f]",
            ):
                warn_old_fingerprints(f"{self.uri}, namespace {self.namespace!r}")
        current = raw.decode("utf-8", "replace")
        if current != method.index_name:
            raise StoreError(self._refusal(method, current))
        self._indexed.add(method.index_name)

    def _claim_layout(self, method: NearMethod, index: str) -> bytes:
        """Claim ``index`` for ``method`` unless a worker did: the claim held."""
        field = f"near:{method.name}"
        self._call(
            "record the near-duplicate index", self.client.hsetnx, self._run_key, field, index
        )
        raw = self._call("read the near-duplicate index", self.client.hget, self._run_key, field)
        return raw or b""

    def _index_in_use(self, method: NearMethod) -> str | None:
        """The name of an index of ``method`` that holds band keys, if any."""
        base = _glob(f"{self.base}:n:{method.name}")
        start = len(self.base) + 3
        for pattern in (f"{base}:[0-9a-f][0-9a-f]", f"{base}-*"):
            found = self._call("look for near-duplicate indexes", self._first_key, pattern)
            if found is not None:
                return str(found.decode("utf-8", "replace")[start:-3])
        return None

    def _first_key(self, pattern: str) -> bytes | None:
        return next(iter(self.client.scan_iter(match=pattern, count=1000)), None)

    def _refusal(self, method: NearMethod, current: str) -> str:
        return (
            f"namespace {self.namespace!r} of {self.uri} holds near-duplicate texts "
            f"indexed for {fitting_settings(current)}, and this crawl's settings need "
            f"index {method.index_name!r}: run it with those settings, with "
            "-s DEDUP_RESET=1 to start the namespace over (every worker of the "
            "namespace restarted), or with another DEDUP_NAMESPACE"
        )

    # -- rel=canonical -----------------------------------------------------

    def claim(self, key: int, owner: int) -> int | None:
        return self._first("k", self._claimed, key, owner, "record a canonical claim")

    def _filed_slot(self, key: int) -> tuple[str, bytes]:
        return f"{self.base}:f:{key >> 56:02x}", key.to_bytes(8, "little")

    def add_filed(self, key: int, data: bytes) -> bool:
        name, field = self._filed_slot(key)
        record = len(data).to_bytes(2, "little") + data
        added = self._call(
            "record a filed item",
            self._append,
            keys=[name],
            args=[field, record, FILED_LIMIT * len(record)],
        )
        return bool(added)

    def filed(self, key: int) -> list[bytes]:
        name, field = self._filed_slot(key)
        value = self._call("read filed items", self.client.hget, name, field) or b""
        found, i = [], 0
        while i + 2 <= len(value):
            size = int.from_bytes(value[i : i + 2], "little")
            found.append(value[i + 2 : i + 2 + size])
            i += 2 + size
        return found

    # -- lost server state ---------------------------------------------------
    #
    # A Redis that restarts without persistence (or goes back to an older
    # snapshot, or is flushed) answers for a forgotten namespace as for a new
    # one. Three things tell them apart: field ``epoch`` of ``P:run``, written
    # when the namespace is first used and kept by DEDUP_RESET; write counters
    # there (``writes`` for the namespace, ``writes:<worker>`` for each worker),
    # incremented in the same pipeline as every write, so a server that went
    # back answers a count this worker has seen already; and, on each machine, a
    # marker file under the project's ``.scrapy`` directory (or JOBDIR) saying
    # this namespace existed, with which epoch, run and count. Pages kept before
    # a loss was found count for nothing from then on (``trusted_since``): what
    # they led to may be gone, so they are fetched again.

    def _check_epoch(self, join: bool) -> None:
        """Before joining a run: find whether the server lost the namespace's
        data since this machine last used it, and if so say so and distrust
        what is left (see :meth:`_lost`). A tool (``join=False``) only looks."""
        run_key = f"{self.base}:run"
        fields = ["epoch", "run", "writes", "kept", "texts", "trusted_since"]
        epoch, run, writes, kept, texts, trusted = self.client.hmget(run_key, fields)
        self._trusted_since = int(trusted or 0)
        if not join:
            return
        marker = self._read_marker()
        known = str(marker.get("epoch") or "").encode()
        why = None
        if epoch is None and run is None and (writes or kept or texts):
            # Every run sets "run": only a worker that went on writing after the
            # server forgot everything leaves counters without it.
            why = "its run record holds only what a worker wrote after it was emptied"
        elif epoch is None and known:
            why = "this machine crawled it before and the server holds none of it now"
        elif epoch is not None and known and epoch != known:
            why = "a worker that did not know it started it over from empty"
        elif epoch == known and int(writes or 0) < int(marker.get("writes") or 0):
            why = "the server went back to a state older than this machine's last writes"
        if epoch is None:  # a new namespace (or one from before epochs): name it
            self.client.hsetnx(run_key, "epoch", known or os.urandom(8).hex())
            epoch = self.client.hget(run_key, "epoch") or b""
        self._epoch = epoch
        if why is not None:
            self._lost(
                f"since this machine last used it ({why})",
                run_floor=int(marker.get("run") or 0),
                writes_floor=int(marker.get("writes") or 0),
            )

    def _note_epoch(self, join: bool) -> None:
        """After joining a run: start this worker's write counter and note on
        this machine that the namespace exists."""
        if not join:
            return

        def note(pipe: Any) -> None:
            pipe.hset(self._run_key, f"writes:{self.worker}", 1)
            pipe.hget(self._run_key, "writes")

        self._total_writes = int(self._pipe("note the worker", note)[1] or 0)
        self._writes = 1
        self._write_marker()

    def _stamp(self, pipe: Any) -> None:
        """Count a write, in the pipeline that writes (see :meth:`_stamped`)."""
        pipe.hincrby(self._run_key, "writes", 1)
        pipe.hincrby(self._run_key, f"writes:{self.worker}", 1)

    def _stamped(self, answers: list[Any]) -> None:
        """This worker's count as the server answers it: not above the last
        one means the server forgot writes (it restarted empty, or went back
        to an older snapshot): the unfinished requests of this worker are
        written again, and the loss recorded."""
        total, mine = int(answers[-2]), int(answers[-1])
        lost = mine <= self._writes
        self._writes, self._total_writes = mine, max(total, self._total_writes)
        if lost:
            self._lost_mid_run = True
            self._lost("during the crawl", run_floor=self.run, writes_floor=self._total_writes)
            self._write_rows_again()

    def _lost(self, when: str, *, run_floor: int, writes_floor: int) -> None:
        """The server lost data of the namespace: say so at WARNING, and make
        it safe to go on with what is left. Pages kept until now count for
        nothing (they are fetched again: the requests they led to may be
        gone), run numbers never go back (URL keys seen by an earlier run
        must not count as seen in a new one), and the run record gets its
        epoch and text normalization back (no false warning about old texts)."""
        self.lost_state += 1
        if self.on_lost_state is not None:
            self.on_lost_state()
        self._trusted_since = max(self._trusted_since, int(time.time()) + 1)
        run_key = f"{self.base}:run"
        run, writes = self._call("read the run", self.client.hmget, run_key, ["run", "writes"])

        def restore(pipe: Any) -> None:
            pipe.hset(run_key, "trusted_since", self._trusted_since)
            pipe.hsetnx(run_key, "epoch", self._epoch)
            pipe.hsetnx(run_key, "text_version", TEXT_VERSION)
            if int(run or 0) < run_floor:
                pipe.hset(run_key, "run", run_floor)
            if int(writes or 0) < writes_floor:
                pipe.hset(run_key, "writes", writes_floor)

        self._pipe("restore the run record", restore)
        logger.warning(
            "Dedup store %s lost the data of namespace %r %s: the server restarted "
            "without persistence, went back to an older snapshot, or was flushed. Going "
            "on with what is left: pages kept until now are fetched again (their items "
            "come out again where their texts were lost too), and this run is not "
            "complete for later runs (see dedup/store/lost_state)",
            self.uri,
            self.namespace,
            when,
        )

    def _write_rows_again(self) -> None:
        """After a loss found mid-crawl: this worker's unfinished requests go
        back into the frontier, and the worker back into its run."""
        rows = list(self._rows.items())
        self._call("rejoin the run", self.client.hset, self._run_key, f"w:{self.worker}", self.run)
        for start in range(0, len(rows), 5000):
            chunk = rows[start : start + 5000]

            def write(pipe: Any, chunk: list[tuple[int, str]] = chunk) -> None:
                for key, request in chunk:
                    pipe.hset(*self._pending_slot(key), request.encode("utf-8", "surrogatepass"))

            self._pipe("write the frontier again", write)
        logger.info("Wrote %d unfinished requests of this worker to the frontier again", len(rows))
        self._write_marker()

    def _notes_kept_by_reset(self) -> dict[str, Any]:
        """The fields of the run record a DEDUP_RESET keeps: the epoch and the
        write counters (a reset is not a loss)."""
        notes = self._call("read the run", self.client.hgetall, self._run_key)
        return {
            name.decode(): value
            for name, value in notes.items()
            if name == b"epoch" or name.startswith(b"writes")
        }

    def _marker_path(self) -> str | None:
        if not self.state_dir:
            return None
        digest = hashlib.blake2b(
            f"{self.uri}\0{self.base}".encode("utf-8", "surrogatepass"), digest_size=8
        ).hexdigest()
        return os.path.join(self.state_dir, f"dedup-redis-{digest}.json")

    def _read_marker(self) -> dict[str, Any]:
        path = self._marker_path()
        if path is None:
            return {}
        try:
            with open(path, encoding="utf-8") as file:
                marker = json.load(file)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("Ignoring the unreadable dedup marker file %s: %s", path, exc)
            return {}
        fields = {"epoch": str, "run": int, "writes": int}
        if not isinstance(marker, dict) or any(
            type(marker.get(name, kind())) is not kind for name, kind in fields.items()
        ):
            logger.warning("Ignoring the dedup marker file %s: not one this version wrote", path)
            return {}
        return marker

    def _write_marker(self) -> None:
        """Note on this machine that the namespace exists (atomically: a
        kill -9 leaves the old marker or the new one)."""
        path = self._marker_path()
        if path is None or not self._join_run:
            return
        marker = {
            "store": self.uri,
            "namespace": self.base,
            "epoch": self._epoch.decode("utf-8", "replace"),
            "run": self.run,
            "writes": self._total_writes,
        }
        temp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(temp, "w", encoding="utf-8") as file:
                json.dump(marker, file)
            os.replace(temp, path)
        except OSError as exc:  # a read-only project: detection relies on the server alone
            logger.warning("Cannot write the dedup marker file %s: %s", path, exc)

    def _leave_epoch(self) -> None:
        if self._join_run:
            self._call("leave the run", self.client.hdel, self._run_key, f"writes:{self.worker}")
            self._write_marker()

    def end_run(self) -> None:
        if self._lost_mid_run:
            logger.warning(
                "This run is not complete for later runs: dedup store %s lost data of "
                "namespace %r during it; the next run fetches again the pages kept before "
                "the loss was found",
                self.uri,
                self.namespace,
            )

    # -- life cycle ----------------------------------------------------------

    def clear(self, urls_only: bool = False) -> None:
        """Delete the namespace's keys (on every node of a cluster): its URL
        keys only, or everything. Patterns are exact, so namespace ``shop``
        never touches ``shop:2026``."""
        self._known.clear()
        if not urls_only:
            self._claimed.clear()
        base = _glob(self.base)
        hex2 = "[0-9a-f]" * 2
        patterns = [f"{base}:u:{hex2}{hex2}"]
        if not urls_only:
            patterns += [f"{base}:c:{hex2}", f"{base}:f:{hex2}", f"{base}:k:{hex2}{hex2}"]
            patterns += [f"{base}:p:{hex2}", f"{base}:learn"]
            patterns.append(f"{base}:w:{{{_tag(self.base)}}}:*")  # leases, rows' owners
            self._adds.clear()
            self._dones.clear()
            self._keeps.clear()
            self._confirms.clear()
            for method in _METHODS:
                patterns += [f"{base}:n:{method}:{hex2}", f"{base}:d:{method}:{hex2}"]
                patterns.append(f"{base}:n:{method}{INDEX_SUFFIX_GLOB}:{hex2}")
            self._indexed.clear()
            # Last: the near-duplicate claim goes once no band key is left.
            patterns.append(f"{base}:run")
            kept_notes = self._notes_kept_by_reset()
        try:
            for pattern in patterns:
                names = list(self.client.scan_iter(match=pattern, count=1000))
                pipe = self.client.pipeline(transaction=False)
                for name in names:
                    pipe.unlink(name)
                pipe.execute()
            if not urls_only:  # the workers connected now stay in this run
                notes = {
                    "run": self.run,
                    f"w:{self.worker}": self.run,
                    "text_version": TEXT_VERSION,
                    **kept_notes,
                }
                self.client.hset(self._run_key, mapping=notes)
        except self._errors as exc:
            raise StoreError(f"dedup store {self.uri} failed to clear: {exc}") from exc
        self._kept.clear()
        self._expired.clear()

    def close(self) -> None:
        try:
            self.flush()
            self.release_lease()
            self._call("leave the run", self.client.hdel, self._run_key, f"w:{self.worker}")
            self._leave_epoch()
        finally:
            with contextlib.suppress(*self._errors):
                self.client.close()

    # -- for tools -------------------------------------------------------------

    def namespace_exists(self) -> bool:
        """Whether any key of the namespace exists: its run notes (every
        worker writes them), else URL keys, texts or the frontier of an older
        version."""
        if self._call("look for the namespace", self.client.exists, f"{self.base}:run"):
            return True
        base, hex2 = _glob(self.base), "[0-9a-f]" * 2
        patterns = [f"{base}:u:{hex2}{hex2}", f"{base}:c:{hex2}", f"{base}:p:{hex2}"]
        return any(
            self._call("look for the namespace", self._first_key, pattern) is not None
            for pattern in patterns
        )

    def namespaces(self) -> list[str]:
        """The namespaces of this prefix that have run notes (for messages)."""
        prefix = self.base[: -len(self.namespace) - 1]
        pattern = f"{_glob(prefix)}:*:run"
        names = self._call(
            "list namespaces", lambda: list(self.client.scan_iter(match=pattern, count=1000))
        )
        start = len(prefix) + 1
        return sorted({name.decode("utf-8", "replace")[start:-4] for name in names})


def memory_usage(client: redis.Redis, pattern: str) -> int:
    """Bytes Redis reports (``MEMORY USAGE``) for the keys matching ``pattern``."""
    total = 0
    for name in client.scan_iter(match=pattern, count=1000):
        total += int(client.memory_usage(name, samples=0) or 0)
    return total
