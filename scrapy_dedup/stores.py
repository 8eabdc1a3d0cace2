"""Where dedup state lives: memory, an SQLite file or Redis. No Scrapy import.

Components never talk to a database directly: they hold a store and ask it to
record a key. Keys are 64-bit integers (hashes computed by the caller), values
small integers the caller packs; a store only remembers the first value
recorded for a key. :func:`open_store` builds one from a ``DEDUP_STORE`` URI.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import time
import zlib
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import numpy as np

if TYPE_CHECKING:
    from scrapy_dedup.near import NearIndex, NearMethod

__all__ = [
    "PREVIOUS_RUN",
    "CompactMap",
    "DedupStore",
    "MemoryStore",
    "SqliteStore",
    "StoreError",
    "open_store",
    "redact",
]

logger = logging.getLogger(__name__)

#: Set on the value of a URL key that an earlier run recorded (SQLite).
PREVIOUS_RUN = 1 << 62
_U64 = (1 << 64) - 1
_FILED_LIMIT = 32  # a page's first items are enough to compare a later variant against


class StoreError(Exception):
    """A store cannot do what was asked: unreachable, corrupt, foreign..."""


class CompactMap:
    """A map from uint64 to uint64 in about 16-30 bytes per entry.

    Python's ``set`` of 20-byte digests (Scrapy's ``RFPDupeFilter``) costs
    about 133 bytes per entry. Here most entries sit in two sorted numpy
    arrays searched with :func:`bisect.bisect_left`; recent ones wait in a
    small dict that is merged in once it reaches an eighth of the arrays.

    >>> m = CompactMap()
    >>> m.setdefault(7, 1) is None, m.setdefault(7, 2), len(m)
    (True, 1, 1)
    """

    _MIN_BUFFER = 4096

    def __init__(self) -> None:
        self._keys = np.empty(0, dtype=np.uint64)
        self._values = np.empty(0, dtype=np.uint64)
        self._key_view = self._keys.data
        self._value_view = self._values.data
        self._buffer: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._keys) + len(self._buffer)

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def get(self, key: int) -> int | None:
        value = self._buffer.get(key)
        if value is not None:
            return value
        keys = self._key_view
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return int(self._value_view[i])
        return None

    def setdefault(self, key: int, value: int) -> int | None:
        """Record ``value`` for a new ``key`` and return ``None``; for a known
        key change nothing and return its first value."""
        existing = self.get(key)
        if existing is not None:
            return existing
        self._buffer[key] = value
        if len(self._buffer) >= max(self._MIN_BUFFER, len(self._keys) >> 3):
            self._merge()
        return None

    def update(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Bulk-load pairs; for a repeated key the first value wins."""
        self._merge()
        keys = np.concatenate([self._keys, keys.astype(np.uint64)])
        values = np.concatenate([self._values, values.astype(np.uint64)])
        keys, first = np.unique(keys, return_index=True)  # first occurrence of each
        self._set_arrays(keys, values[first])

    def clear(self) -> None:
        self._buffer.clear()
        self._set_arrays(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64))

    def _merge(self) -> None:
        if not self._buffer:
            return
        new_keys = np.fromiter(self._buffer.keys(), dtype=np.uint64, count=len(self._buffer))
        new_values = np.fromiter(self._buffer.values(), dtype=np.uint64, count=len(self._buffer))
        order = np.argsort(new_keys)
        new_keys, new_values = new_keys[order], new_values[order]
        at = np.searchsorted(self._keys, new_keys)
        self._set_arrays(
            np.insert(self._keys, at, new_keys), np.insert(self._values, at, new_values)
        )
        self._buffer.clear()

    def _set_arrays(self, keys: np.ndarray, values: np.ndarray) -> None:
        self._key_view.release()
        self._value_view.release()
        self._keys, self._values = keys, values
        self._key_view = self._keys.data
        self._value_view = self._values.data

    def nbytes(self) -> int:
        """Bytes held by the arrays (the dict buffer not counted)."""
        return int(self._keys.nbytes + self._values.nbytes)


class DedupStore:
    """The interface every store implements (the components' only way to state).

    URL keys: ``add_url(key, info)`` records a request key and returns
    ``None`` when it is new, else the ``info`` recorded with it first.
    Content: ``add_content`` does the same for exact text digests, remembering
    the first URL; ``match_or_add_near`` returns the kept document a
    fingerprint is a near duplicate of, or keeps it. rel=canonical:
    ``add_filed``/``filed`` keep the encoded fingerprints of items filed under
    a canonical URL.

    A store that outlives the run may hold some writes back until the item
    that caused them is safely out of the pipeline: writes made inside
    :meth:`hold` become durable on :meth:`release` and are forgotten on
    :meth:`discard` (they still count for the rest of this run).
    """

    #: Whether URL keys survive the run only for pages whose items were kept
    #: (:meth:`keep_url`), not every key seen (SQLite; see the README).
    persists_kept = False

    def add_url(self, key: int, info: int) -> int | None:
        raise NotImplementedError

    def get_url(self, key: int) -> int | None:
        raise NotImplementedError

    def keep_url(self, key: int, info: int) -> None:
        """Record ``key`` as done for later runs: its page's items were kept."""
        self.add_url(key, info)

    def url_count(self) -> int:
        raise NotImplementedError

    def get_content(self, digest: bytes) -> str | None:
        raise NotImplementedError

    def add_content(self, digest: bytes, url: str) -> str | None:
        raise NotImplementedError

    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        """``(URL, score)`` of the kept document ``fingerprint`` is nearest to,
        among its near duplicates; ``None`` when it has none."""
        raise NotImplementedError

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        """Keep ``fingerprint`` as the document at ``url``."""
        raise NotImplementedError

    def match_or_add_near(
        self, method: NearMethod, fingerprint: Any, url: str
    ) -> tuple[str, Any] | None:
        """:meth:`match_near`, and :meth:`add_near` when there is no match."""
        match = self.match_near(method, fingerprint)
        if match is None:
            self.add_near(method, fingerprint, url)
        return match

    def add_filed(self, key: int, data: bytes) -> bool:
        """Remember an (encoded) fingerprint of an item filed under the
        canonical URL ``key``; the first few per URL are kept (``True``)."""
        raise NotImplementedError

    def filed(self, key: int) -> list[bytes]:
        """The encoded fingerprints of items filed under the canonical URL ``key``."""
        raise NotImplementedError

    # The frontier of a store that outlives the run (SQLite): requests
    # scheduled but not yet done, fed again to the next run after a crash.
    def add_pending(self, key: int, request: str) -> None:
        """Remember a scheduled request (serialized) until :meth:`done_pending`."""

    def done_pending(self, key: int) -> None:
        """The request of ``key`` was processed: its outputs are out."""

    def pending_requests(self) -> list[str]:
        """Requests an earlier run scheduled and never finished."""
        return []

    def clear_pending(self) -> None:
        """Forget the frontier (the run finished)."""

    @contextlib.contextmanager
    def hold(self) -> Iterator[Any]:
        """Writes made inside wait for :meth:`release` of the token yielded."""
        yield None

    def release(self, token: Any) -> None:
        """Make the writes held under ``token`` durable."""

    def discard(self, token: Any) -> None:
        """Forget the writes held under ``token`` (they are not persisted)."""

    def clear(self, urls_only: bool = False) -> None:
        """Forget the namespace's URL keys, or everything it holds."""
        raise NotImplementedError

    def ping(self) -> None:
        """Raise :class:`StoreError` unless the store answers."""

    def flush(self) -> None:
        """Make what was recorded durable (where the store persists at all)."""

    def close(self) -> None:
        """Flush and release resources; the store is not used afterwards."""


class MemoryStore(DedupStore):
    """In-process state, gone when the process ends."""

    def __init__(self) -> None:
        self._urls = CompactMap()
        self._content: dict[bytes, str] = {}
        self._near: dict[str, tuple[NearIndex, list[str]]] = {}
        self._filed: dict[int, list[bytes]] = {}

    def add_url(self, key: int, info: int) -> int | None:
        return self._urls.setdefault(key, info)

    def get_url(self, key: int) -> int | None:
        return self._urls.get(key)

    def url_count(self) -> int:
        return len(self._urls)

    def get_content(self, digest: bytes) -> str | None:
        return self._content.get(digest)

    def add_content(self, digest: bytes, url: str) -> str | None:
        first = self._content.get(digest)
        if first is None:
            self._content[digest] = url
        return first

    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        index, urls = self._near_state(method)
        matches = index.query(fingerprint)
        if matches:
            doc, score = matches[0]
            return urls[doc], score
        return None

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        index, urls = self._near_state(method)
        index.add(fingerprint, len(urls))
        urls.append(url)

    def _near_state(self, method: NearMethod) -> tuple[NearIndex, list[str]]:
        state = self._near.get(method.name)
        if state is None:
            state = self._near[method.name] = (method.new_index(), [])
        return state

    def add_filed(self, key: int, data: bytes) -> bool:
        filed = self._filed.setdefault(key, [])
        if len(filed) >= _FILED_LIMIT:
            return False
        filed.append(data)
        return True

    def filed(self, key: int) -> list[bytes]:
        return self._filed.get(key, [])

    def clear(self, urls_only: bool = False) -> None:
        self._urls.clear()
        if not urls_only:
            self._content.clear()
            self._near.clear()
            self._filed.clear()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS urls (
    ns INTEGER NOT NULL, key INTEGER NOT NULL, info INTEGER NOT NULL,
    PRIMARY KEY (ns, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS content (
    ns INTEGER NOT NULL, digest BLOB NOT NULL, url TEXT NOT NULL,
    PRIMARY KEY (ns, digest)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS near (
    ns INTEGER NOT NULL, method TEXT NOT NULL, fingerprint BLOB NOT NULL, url TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS near_by_method ON near (ns, method);
CREATE TABLE IF NOT EXISTS pending (
    ns INTEGER NOT NULL, key INTEGER NOT NULL, request TEXT NOT NULL,
    PRIMARY KEY (ns, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS filed (
    ns INTEGER NOT NULL, key INTEGER NOT NULL, fingerprint BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS filed_by_key ON filed (ns, key);
"""
_APPLICATION_ID = 0x53445550  # "SDUP", in the file header: this file is ours
_SCHEMA_VERSION = 1
_INSERT = {
    "urls": "INSERT OR IGNORE INTO urls VALUES (?, ?, ?)",
    "content": "INSERT OR IGNORE INTO content VALUES (?, ?, ?)",
    "near": "INSERT INTO near VALUES (?, ?, ?, ?)",
    "filed": "INSERT INTO filed VALUES (?, ?, ?)",
    "pending": "INSERT OR REPLACE INTO pending VALUES (?, ?, ?)",
    # Runs after the inserts of its batch: a request is done after it was scheduled.
    "done": "DELETE FROM pending WHERE ns = ? AND key = ?",
}


def _signed(key: int) -> int:
    return key - (1 << 64) if key >= 1 << 63 else key


class SqliteStore(MemoryStore):
    """Memory state backed by an SQLite file, read back when the next run opens it.

    Every answer comes from memory; new records are written in batched
    transactions (every ``batch`` records or ``interval`` seconds, and on
    :meth:`flush`/:meth:`close`) to a WAL-mode file, so a ``kill -9`` loses at
    most the last uncommitted batch, never a committed one, and never corrupts
    the file. What is written:

    - ``persist="kept"`` (``DEDUP_STORE = "sqlite:///..."``): the keys of
      pages whose items were kept (:meth:`keep_url`) and the kept items' text
      records. A page that gave no item is fetched again by the next run, so
      the links it leads to are found again even after a crash.
    - ``persist="seen"`` (``JOBDIR``): every key seen, as Scrapy's own
      ``requests.seen`` does, to pair with the scheduler queue Scrapy keeps
      there.

    One process at a time may use a namespace: a second one gets a
    :class:`StoreError` (an OS lock, released when the process dies).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        namespace: str = "default",
        *,
        persist: str = "kept",
        batch: int = 2000,
        interval: float = 1.0,
    ) -> None:
        super().__init__()
        if persist not in ("kept", "seen"):
            raise ValueError(f"persist must be 'kept' or 'seen', not {persist!r}")
        self.path = Path(path)
        self.namespace = namespace
        self.persists_kept = persist == "kept"
        self._batch = batch
        self._interval = interval
        self._pending: dict[str, list[tuple[Any, ...]]] = {table: [] for table in _INSERT}
        self._pending_count = 0
        self._holding: list[tuple[str, tuple[Any, ...]]] | None = None
        self._last_commit = time.monotonic()
        self._near_loaded: set[str] = set()
        self._kept = CompactMap()  # keys written by keep_url() in this run
        self._frontier: list[str] = []
        self._closed = False
        #: Called with the StoreError of a failed batch write, instead of raising
        #: it from the call that happened to trigger the write.
        self.on_write_error: Any = None
        self._lock_file: Any = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite store {self.path}: {exc}") from exc
        try:
            self._lock(namespace)
            self._check_and_create()
            self._ns = self._namespace_id(namespace)
            self._load()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            self._unlock()
            raise StoreError(
                f"{self.path} is not a readable scrapy-dedup SQLite store ({exc}); "
                "nothing was changed: move the file away or point DEDUP_STORE elsewhere"
            ) from exc
        except BaseException:
            self._db.close()
            self._unlock()
            raise

    # -- opening ---------------------------------------------------------

    def _lock(self, namespace: str) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock, one process per file by convention
            return
        # One lock file per namespace, flock()ed: the lock dies with the process,
        # and two opens of one namespace conflict even within one process.
        tag = zlib.crc32(namespace.encode("utf-8", "surrogatepass"))
        self._lock_file = open(f"{self.path}.{tag:08x}.lock", "a+b")  # noqa: SIM115
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._lock_file.close()
            self._lock_file = None
            raise StoreError(
                f"namespace {namespace!r} of {self.path} is in use by another process; "
                "run one crawl per namespace at a time (DEDUP_NAMESPACE), or use Redis "
                "to share state between processes"
            ) from exc

    def _unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _check_and_create(self) -> None:
        db = self._db
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        tables = [
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        if app_id != _APPLICATION_ID:
            if tables or app_id:
                raise StoreError(
                    f"{self.path} is an SQLite database of something else (tables: "
                    f"{', '.join(sorted(tables)) or 'none'}); scrapy-dedup will not write "
                    "into it: point DEDUP_STORE to a file of its own"
                )
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA application_id={_APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        else:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written by a newer scrapy-dedup (schema {version}); "
                    "upgrade scrapy-dedup to use it"
                )
            problems = [row[0] for row in db.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise StoreError(
                    f"{self.path} is damaged ({'; '.join(problems[:3])}); nothing was "
                    "changed: move it away (or recover it with sqlite3's .recover)"
                )
            db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "PRAGMA synchronous=NORMAL"
        )  # WAL + NORMAL: a killed process loses nothing committed

    def _namespace_id(self, namespace: str) -> int:
        self._db.execute("INSERT OR IGNORE INTO namespaces (name) VALUES (?)", (namespace,))
        row = self._db.execute("SELECT id FROM namespaces WHERE name = ?", (namespace,)).fetchone()
        return int(row[0])

    def _load(self) -> None:
        db, ns = self._db, self._ns
        rows = db.execute("SELECT key, info FROM urls WHERE ns = ?", (ns,)).fetchall()
        if rows:
            pairs = np.array(rows, dtype=np.int64).view(np.uint64)
            self._urls.update(pairs[:, 0], pairs[:, 1] | np.uint64(PREVIOUS_RUN))
        for digest, url in db.execute("SELECT digest, url FROM content WHERE ns = ?", (ns,)):
            self._content[bytes(digest)] = url
        self._frontier = [
            row[0] for row in db.execute("SELECT request FROM pending WHERE ns = ?", (ns,))
        ]
        for key, data in db.execute(
            "SELECT key, fingerprint FROM filed WHERE ns = ? ORDER BY rowid", (ns,)
        ):
            self._filed.setdefault(key & _U64, []).append(bytes(data))
        logger.info(
            "Dedup store %s, namespace %r: %d URL keys, %d texts and %d unfinished "
            "requests from earlier runs",
            self.path,
            self.namespace,
            len(rows),
            len(self._content),
            len(self._frontier),
        )

    def _near_state(self, method: NearMethod) -> tuple[NearIndex, list[str]]:
        state = super()._near_state(method)
        if method.name not in self._near_loaded:
            self._near_loaded.add(method.name)
            index, urls = state
            for data, url in self._db.execute(
                "SELECT fingerprint, url FROM near WHERE ns = ? AND method = ? ORDER BY rowid",
                (self._ns, method.name),
            ):
                try:
                    fingerprint = method.decode(bytes(data))
                except ValueError:  # written with other parameters (num_perm): not comparable
                    continue
                index.add(fingerprint, len(urls))
                urls.append(url)
        return state

    # -- writes ------------------------------------------------------------

    def _write(self, table: str, row: tuple[Any, ...]) -> None:
        if self._holding is not None:
            self._holding.append((table, row))
            return
        self._pending[table].append(row)
        self._pending_count += 1
        if (
            self._pending_count >= self._batch
            or time.monotonic() - self._last_commit >= self._interval
        ):
            try:
                self.flush()
            except StoreError as exc:
                # Answers still come from memory; the rows wait for the next try.
                self._last_commit = time.monotonic()
                if self.on_write_error is None:
                    raise
                self.on_write_error(exc)

    def add_url(self, key: int, info: int) -> int | None:
        first = self._urls.setdefault(key, info)
        if first is None and not self.persists_kept:
            self._write("urls", (self._ns, _signed(key), info & ~PREVIOUS_RUN))
        return first

    def keep_url(self, key: int, info: int) -> None:
        if not self.persists_kept:  # every key seen is written already
            self.add_url(key, info)
            return
        first = self._urls.setdefault(key, info)
        if (first is not None and first & PREVIOUS_RUN) or key in self._kept:
            return  # on disk already
        self._kept.setdefault(key, 1)
        self._write("urls", (self._ns, _signed(key), (first or info) & ~PREVIOUS_RUN))

    def add_content(self, digest: bytes, url: str) -> str | None:
        first = super().add_content(digest, url)
        if first is None:
            self._write("content", (self._ns, digest, url))
        return first

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        super().add_near(method, fingerprint, url)
        self._write("near", (self._ns, method.name, method.encode(fingerprint), url))

    def add_filed(self, key: int, data: bytes) -> bool:
        added = super().add_filed(key, data)
        if added:
            self._write("filed", (self._ns, _signed(key), data))
        return added

    def add_pending(self, key: int, request: str) -> None:
        self._write("pending", (self._ns, _signed(key), request))

    def done_pending(self, key: int) -> None:
        self._write("done", (self._ns, _signed(key)))

    def pending_requests(self) -> list[str]:
        found, self._frontier = self._frontier, []
        return found

    def clear_pending(self) -> None:
        for table in ("pending", "done"):
            self._pending_count -= len(self._pending[table])
            self._pending[table].clear()
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute("DELETE FROM pending WHERE ns = ?", (self._ns,))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write to the SQLite store {self.path}: {exc}") from exc

    @contextlib.contextmanager
    def hold(self) -> Iterator[Any]:
        outer, self._holding = self._holding, []
        try:
            yield self._holding
        finally:
            self._holding = outer

    def release(self, token: Any) -> None:
        for table, row in token or ():
            self._write(table, row)

    def discard(self, token: Any) -> None:
        if token:
            token.clear()

    def flush(self) -> None:
        if not self._pending_count:
            self._last_commit = time.monotonic()
            return
        try:
            with self._db:  # one transaction
                self._db.execute("BEGIN")
                for table, rows in self._pending.items():
                    if rows:
                        self._db.executemany(_INSERT[table], rows)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write to the SQLite store {self.path}: {exc}") from exc
        for rows in self._pending.values():
            rows.clear()
        self._pending_count = 0
        self._last_commit = time.monotonic()

    def clear(self, urls_only: bool = False) -> None:
        super().clear(urls_only)
        self._kept.clear()
        tables = ["urls"] if urls_only else [t for t in _INSERT if t != "done"]
        for table in [*tables, "done"]:
            self._pending_count -= len(self._pending[table])
            self._pending[table].clear()
        if not urls_only:
            self._frontier.clear()
        with self._db:
            self._db.execute("BEGIN")
            for table in tables:
                self._db.execute(f"DELETE FROM {table} WHERE ns = ?", (self._ns,))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
        finally:
            self._db.close()
            self._unlock()


def redact(uri: str) -> str:
    """``uri`` with its password replaced, for messages and logs.

    >>> redact("redis://:s3cret@cache:6379/0")
    'redis://:***@cache:6379/0'
    """
    return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", uri)


def open_store(
    uri: str,
    namespace: str,
    *,
    jobdir: str | None = None,
    prefix: str = "dedup",
    **options: Any,
) -> DedupStore:
    """The store a ``DEDUP_STORE`` URI names.

    - ``memory``: in this process; with ``jobdir`` (Scrapy's ``JOBDIR``) kept
      in ``<jobdir>/dedup.sqlite3`` for pause and resume;
    - ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (as in
      SQLAlchemy);
    - ``redis://host:port/db`` (also ``rediss://``, ``unix://``), or
      ``redis+cluster://host:port`` for a Redis Cluster (any node).

    Raises :class:`StoreError` when the store cannot be used, ``ValueError``
    for a URI of no known kind.
    """
    uri = uri.strip()
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else uri.lower()
    if scheme == "memory":
        if jobdir:
            return SqliteStore(Path(jobdir, "dedup.sqlite3"), namespace, persist="seen")
        return MemoryStore()
    if scheme == "sqlite":
        path = unquote(urlsplit(uri).path)[1:] if uri.startswith("sqlite:///") else ""
        if not path:
            raise ValueError(
                f"DEDUP_STORE={uri!r}: write sqlite:///relative/file.db or sqlite:////abs/file.db"
            )
        return SqliteStore(path, namespace, persist="kept", **options)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
        try:
            from scrapy_dedup.redis_store import RedisStore

            return RedisStore.from_uri(uri, namespace, prefix=prefix)
        except ImportError as exc:
            raise StoreError(
                f"DEDUP_STORE={redact(uri)!r} needs redis-py: pip install 'scrapy-dedup[redis]'"
            ) from exc
    raise ValueError(
        f"DEDUP_STORE={uri!r} is not a store URI: use 'memory', 'sqlite:///path.db', "
        "'redis://host:port/db' or 'redis+cluster://host:port'"
    )
