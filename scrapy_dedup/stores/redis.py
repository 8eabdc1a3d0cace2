"""Dedup state in Redis, shared by every process of a crawl. No Scrapy import.

Layout (``P`` = ``<prefix>:<namespace>``; fields and values are raw bytes or
integers, never pickles, and nothing read back is evaluated):

============================  =========================================  ==================
key                           field -> value                             written with
============================  =========================================  ==================
``P:u:<top 16 bits, hex>``    low 48 bits of a URL key -> info (int)     HSETNX (Lua)
``P:c:<first byte, hex>``     16-byte text digest -> first URL           HSETNX (Lua)
``P:n:<method>:<byte, hex>``  band key + slot (0-7) -> 8-byte doc id       HSETNX
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

Atomicity: a URL key and a text digest are each set by one script on one key,
so when several workers record the same one at once exactly one wins. A near
duplicate lookup spans several bands (keys on several nodes): it is a read,
then a write. Two near duplicates recorded at the same moment by two workers
(within one round trip of each other) may therefore both be kept; an item is
never dropped unless the document it names was kept.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from scrapy_dedup.stores.base import FILED_LIMIT, DedupStore, StoreError, redact
from scrapy_dedup.stores.compact import CompactMap
from scrapy_dedup.text.near import doc_id

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
# Doc ids per band key: fields <band key><slot>, each set once with HSETNX (a
# cluster pipeline cannot run scripts, and these need none).
_SLOTS = [bytes([slot]) for slot in range(8)]
_METHODS = ("minhash", "simhash")  # near-duplicate methods, for clear()
_LOW48 = (1 << 48) - 1


class RedisStore(DedupStore):
    """A :class:`DedupStore` in Redis or a Redis Cluster (``client``)."""

    def __init__(
        self, client: Any, namespace: str, *, prefix: str = "dedup", uri: str = ""
    ) -> None:
        import redis

        self._redis = redis
        self.client = client
        self.uri = redact(uri) if uri else repr(client)
        self.namespace = namespace
        self.base = f"{prefix}:{namespace}"
        # First values already known (URL keys, claims): see _first().
        self._known = CompactMap()
        self._claimed = CompactMap()
        self._lookup: tuple[str, bytes, list[str], list[bytes | None]] | None = None
        try:
            client.ping()
            self._setnx_get = client.register_script(_SETNX_GET)
            self._append = client.register_script(_APPEND)
        except redis.RedisError as exc:
            # Our message says it all: no chained redis-py traceback in the log.
            raise StoreError(f"cannot reach the dedup store at {self.uri}: {exc}") from None

    @classmethod
    def from_uri(
        cls, uri: str, namespace: str, *, jobdir: str | None = None, prefix: str = "dedup"
    ) -> RedisStore:
        """A store for ``redis://``, ``rediss://``, ``unix://`` or
        ``redis+cluster://`` (``rediss+cluster://``) URIs, which must name
        their host (or socket path)."""
        import redis
        from redis.backoff import NoBackoff
        from redis.cluster import RedisCluster
        from redis.retry import Retry

        # No retries inside redis-py: its default ones back off for seconds on
        # Scrapy's reactor thread, and a retried check-and-set whose first reply
        # was lost would read back its own write as another worker's. The store
        # retries once itself (_call, _set_first), knowing which calls it may.
        options = {
            "socket_connect_timeout": 2,
            "socket_timeout": 5,
            "health_check_interval": 30,
            "retry": Retry(NoBackoff(), 0),
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
        except redis.RedisError as exc:  # a cluster client connects at once
            raise StoreError(f"cannot reach the dedup store at {redact(uri)}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"DEDUP_STORE={redact(uri)!r}: {exc}") from exc
        return cls(client, namespace, prefix=prefix, uri=uri)

    def ping(self) -> None:
        self._call("answer", self.client.ping)

    def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, tried again once after a connection
        error (a dropped idle connection); only for calls safe to repeat."""
        redis = self._redis
        try:
            try:
                return function(*args, **kwargs)
            except (redis.ConnectionError, redis.TimeoutError):
                return function(*args, **kwargs)
        except redis.RedisError as exc:
            raise StoreError(f"dedup store {self.uri} failed to {what}: {exc}") from exc

    def _set_first(self, what: str, name: str, field: bytes, value: bytes) -> bytes | None:
        """Set ``field`` unless it is set; ``None`` when this call set it, else
        the first value. Exactly one of several racing callers gets ``None``."""
        redis = self._redis
        try:
            try:
                found: bytes | None = self._setnx_get(keys=[name], args=[field, value])
                return found
            except (redis.ConnectionError, redis.TimeoutError):
                # The first try may have run with its reply lost: finding our own
                # value now most likely means we set it (an identical value
                # written by another worker at that very moment is a duplicate
                # fetch, never a lost page).
                first = self._setnx_get(keys=[name], args=[field, value])
                return None if first == value else first
        except redis.RedisError as exc:
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
        return self._first("u", self._known, key, info, "record a URL")

    def get_url(self, key: int) -> int | None:
        known = self._known.get(key)
        if known is not None:
            return known
        name, field = self._slot("u", key)
        value = self._call("read a URL", self.client.hget, name, field)
        if value is None:
            return None
        self._known.setdefault(key, int(value))
        return int(value)

    def url_count(self) -> int:
        """Every URL key of the namespace (scans 65,536 hashes: for tests and tools)."""
        names = [f"{self.base}:u:{bucket:04x}" for bucket in range(1 << 16)]
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hlen(name)
        return sum(self._call("count URLs", pipe.execute))

    # -- content -----------------------------------------------------------

    def _content_key(self, digest: bytes) -> str:
        return f"{self.base}:c:{digest[0]:02x}"

    def get_content(self, digest: bytes) -> str | None:
        value = self._call(
            "read a text digest", self.client.hget, self._content_key(digest), digest
        )
        return None if value is None else value.decode("utf-8", "surrogatepass")

    def add_content(self, digest: bytes, url: str) -> str | None:
        first = self._call(
            "record a text digest",
            self._setnx_get,
            keys=[self._content_key(digest)],
            args=[digest, url.encode("utf-8", "surrogatepass")],
        )
        return None if first is None else first.decode("utf-8", "surrogatepass")

    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        encoded = method.encode(fingerprint)
        bands = method.band_keys(fingerprint)
        names = [f"{self.base}:n:{method.name}:{band >> 56:02x}" for band in bands]
        fields = [band.to_bytes(8, "little") for band in bands]
        pipe = self.client.pipeline(transaction=False)
        for name, field in zip(names, fields, strict=True):
            pipe.hmget(name, [field + slot for slot in _SLOTS])
        candidates: dict[bytes, None] = {}
        free: list[bytes | None] = []  # per band: the first free slot's field
        answers = self._call("look up near duplicates", pipe.execute)
        for field, values in zip(fields, answers, strict=True):
            free.append(
                next((field + s for s, v in zip(_SLOTS, values, strict=True) if v is None), None)
            )
            for value in values:
                if value is not None:
                    candidates[value] = None
        # add_near() usually follows at once: it reuses what this lookup found.
        self._lookup = (method.name, encoded, names, free)
        best: tuple[float, Any, str] | None = None
        if candidates:
            pipe = self.client.pipeline(transaction=False)
            for candidate in candidates:
                pipe.hget(self._doc_key(method, candidate), candidate)
            for value in self._call("read near-duplicate candidates", pipe.execute):
                if value is None or len(value) < len(encoded):
                    continue
                try:
                    other = method.decode(value[: len(encoded)])
                except ValueError:
                    continue
                found = method.match(fingerprint, other)
                if found is not None and (best is None or found[0] > best[0]):
                    best = (found[0], found[1], value[len(encoded) :].decode("utf-8", "replace"))
        return None if best is None else (best[2], best[1])

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        encoded = method.encode(fingerprint)
        lookup = self._lookup
        if lookup is None or lookup[0] != method.name or lookup[1] != encoded:
            self.match_near(method, fingerprint)
            lookup = self._lookup
        assert lookup is not None
        self._lookup = None
        _, _, names, free = lookup
        mine = doc_id(encoded)
        pipe = self.client.pipeline(transaction=False)
        # The same text reached again keeps its first URL (HSETNX).
        pipe.hsetnx(
            self._doc_key(method, mine), mine, encoded + url.encode("utf-8", "surrogatepass")
        )
        for name, slot in zip(names, free, strict=True):
            if slot is not None:  # else the band key is shared by _SLOTS documents already
                pipe.hsetnx(name, slot, mine)
        self._call("record a near-duplicate fingerprint", pipe.execute)

    def _doc_key(self, method: NearMethod, doc: bytes) -> str:
        return f"{self.base}:d:{method.name}:{doc[0]:02x}"

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

    # -- life cycle ----------------------------------------------------------

    def clear(self, urls_only: bool = False) -> None:
        """Delete the namespace's keys (on every node of a cluster): its URL
        keys only, or everything. Patterns are exact, so namespace ``shop``
        never touches ``shop:2026``."""
        self._known.clear()
        if not urls_only:
            self._claimed.clear()
        base = re.sub(r"([\\*?\[\]])", r"\\\1", self.base)  # glob-escaped
        hex2 = "[0-9a-f]" * 2
        patterns = [f"{base}:u:{hex2}{hex2}"]
        if not urls_only:
            patterns += [f"{base}:c:{hex2}", f"{base}:f:{hex2}", f"{base}:k:{hex2}{hex2}"]
            for method in _METHODS:
                patterns += [f"{base}:n:{method}:{hex2}", f"{base}:d:{method}:{hex2}"]
        try:
            for pattern in patterns:
                names = list(self.client.scan_iter(match=pattern, count=1000))
                pipe = self.client.pipeline(transaction=False)
                for name in names:
                    pipe.unlink(name)
                pipe.execute()
        except self._redis.RedisError as exc:
            raise StoreError(f"dedup store {self.uri} failed to clear: {exc}") from exc

    def close(self) -> None:
        with contextlib.suppress(self._redis.RedisError):
            self.client.close()


def memory_usage(client: redis.Redis, pattern: str) -> int:
    """Bytes Redis reports (``MEMORY USAGE``) for the keys matching ``pattern``."""
    total = 0
    for name in client.scan_iter(match=pattern, count=1000):
        total += int(client.memory_usage(name, samples=0) or 0)
    return total
