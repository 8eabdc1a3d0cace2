"""SqliteStore: memory state backed by an SQLite file. No Scrapy import."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import numpy as np
from filelock import FileLock, Timeout

from scrapy_dedup.keys import PREVIOUS_RUN
from scrapy_dedup.stores.base import StoreError, warn_old_fingerprints, warn_old_texts
from scrapy_dedup.stores.compact import CompactMap
from scrapy_dedup.stores.memory import MemoryStore
from scrapy_dedup.stores.strings import StringList
from scrapy_dedup.text.clean import TEXT_VERSION

if TYPE_CHECKING:
    from scrapy_dedup.text.near import NearIndex, NearMethod

__all__ = ["SqliteStore"]

logger = logging.getLogger(__name__)

_U64 = (1 << 64) - 1
# After a failed batch write (disk full, file locked), nothing is tried for this
# long, doubled on each failure: every try rewrites the whole backlog.
_LOAD_BATCH = 65536  # stored fingerprints indexed at once at start
_BACKOFF_FIRST = 1.0
# The near-duplicate index is saved at close (opening it is a read, not a
# re-index of every stored fingerprint) once this many texts were added since
# it was last saved, and at least a sixteenth of the saved ones: each save
# rewrites the whole index.
_SAVE_MIN = 16384
_SAVED_FORMAT = 1
_CHECK_LIMIT = 256 << 20  # bytes: larger files are not checked in full at open
_SAVED_MAGIC = b"SDUPNEAR"
_BACKOFF_MAX = 30.0


_SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS urls (
    ns INTEGER NOT NULL, key INTEGER NOT NULL, info INTEGER NOT NULL,
    kept_at INTEGER NOT NULL DEFAULT 0, url TEXT,
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
CREATE TABLE IF NOT EXISTS claims (
    ns INTEGER NOT NULL, key INTEGER NOT NULL, owner INTEGER NOT NULL,
    PRIMARY KEY (ns, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (ns INTEGER PRIMARY KEY, clean INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS text_version (ns INTEGER PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS evidence (ns INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS evidence_by_ns ON evidence (ns);
"""
_STATEMENTS = [statement.strip() for statement in _SCHEMA.split(";") if statement.strip()]
# What version 2 files lack (kept_at: when a page was kept, for DEDUP_RECRAWL_AFTER;
# url: its URL, to forget pages by prefix; runs: whether the last run closed).
_V3_COLUMNS = {
    "kept_at": "ALTER TABLE urls ADD COLUMN kept_at INTEGER NOT NULL DEFAULT 0",
    "url": "ALTER TABLE urls ADD COLUMN url TEXT",
}
_APPLICATION_ID = 0x53445550  # "SDUP", in the file header: this file is ours
# 2: rel=canonical claims in a table of their own (version 1 kept them with the URL keys).
# 3: when and under which URL a page was kept; whether the last run closed.
# 4: the evidence of learned URL rules (DEDUP_LEARN).
_SCHEMA_VERSION = 4
_INSERT = {
    # A page kept again (its DEDUP_RECRAWL_AFTER had passed) gets a new time.
    "urls": "INSERT OR REPLACE INTO urls VALUES (?, ?, ?, ?, ?)",
    "content": "INSERT OR IGNORE INTO content VALUES (?, ?, ?)",
    "near": "INSERT INTO near VALUES (?, ?, ?, ?)",
    "filed": "INSERT INTO filed VALUES (?, ?, ?)",
    "claims": "INSERT OR IGNORE INTO claims VALUES (?, ?, ?)",
    "pending": "INSERT OR REPLACE INTO pending VALUES (?, ?, ?)",
    "evidence": "INSERT INTO evidence VALUES (?, ?)",
    # Runs after the inserts of its batch: a request is done after it was scheduled.
    "done": "DELETE FROM pending WHERE ns = ? AND key = ?",
    "runs": "INSERT OR REPLACE INTO runs VALUES (?, ?)",
}


_FORGOTTEN = -1  # kept_at of a page forgotten (scrapy dedup forget): fetched again


def _row_check(fingerprint: bytes, url: str) -> str:
    """A digest of one stored fingerprint row (the last one a saved index holds)."""
    return hashlib.blake2b(
        bytes(fingerprint) + url.encode("utf-8", "surrogatepass"), digest_size=8
    ).hexdigest()


def _write_saved(path: Path, meta: dict[str, Any], parts: Iterable[tuple[str, Any]]) -> None:
    """Write a saved index: the arrays of ``parts`` one after another (a
    section per name, its parts in order), then a JSON trailer naming the
    sections, its length and a magic. Written aside, then renamed over."""
    sections: dict[str, list[Any]] = {}
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as file:
            for name, array in parts:
                array = np.ascontiguousarray(array)
                section = sections.setdefault(name, [array.dtype.str, 0, file.tell()])
                if section[0] != array.dtype.str:
                    raise ValueError(f"section {name} mixes {section[0]} and {array.dtype.str}")
                array.tofile(file)
                section[1] += int(array.size)
            trailer = json.dumps({**meta, "sections": sections}).encode()
            file.write(trailer + len(trailer).to_bytes(8, "little") + _SAVED_MAGIC)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _read_saved(file: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The trailer of a saved index and its sections as writable arrays."""
    file.seek(0, os.SEEK_END)
    end = file.tell()
    if end < 16:
        raise ValueError("too short")
    file.seek(end - 16)
    tail = file.read(16)
    if tail[8:] != _SAVED_MAGIC:
        raise ValueError("not a saved index")
    length = int.from_bytes(tail[:8], "little")
    file.seek(end - 16 - length)
    meta = json.loads(file.read(length))
    sections = {}
    for name, (dtype, count, offset) in meta.pop("sections").items():
        file.seek(offset)
        sections[name] = np.fromfile(file, dtype=np.dtype(dtype), count=count)
        if len(sections[name]) != count:
            raise ValueError(f"section {name} is cut short")
    return meta, sections


@functools.cache
def _schema_objects() -> dict[str, tuple[str, str, frozenset[str]]]:
    """Every table and index the schema makes: name -> (type, table, columns)."""
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.executescript(_SCHEMA)
        return {
            name: (
                kind,
                table,
                frozenset(row[1] for row in db.execute(f"PRAGMA table_info('{name}')")),
            )
            for kind, name, table in db.execute(
                "SELECT type, name, tbl_name FROM sqlite_master "
                "WHERE name NOT LIKE 'sqlite_autoindex_%'"
            )
        }


def _signed(key: int) -> int:
    return key - (1 << 64) if key >= 1 << 63 else key


class SqliteStore(MemoryStore):
    """Memory state backed by an SQLite file, read back when the next run opens it.

    Every answer comes from memory (except the exact digests of earlier
    runs, looked up in the file), and the near-duplicate index is saved
    beside the file at :meth:`close` (a cache the next open reads instead of
    indexing every stored fingerprint again). New records are written in batched
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

    A failed batch write (disk full; another program holding the write lock
    for longer than ``timeout`` seconds) goes to :attr:`on_write_error`; the
    records wait in memory, and nothing is tried again for a backoff of 1 s,
    doubling to 30 s, so that an outage costs one try of the backlog per
    backoff, not one per record.
    """

    # Its saved near index (a cache of the table) needs doc ids that are the
    # rows of its own URL list.
    _shares_urls = False

    def __init__(
        self,
        path: str | os.PathLike[str],
        namespace: str = "default",
        *,
        persist: str = "kept",
        batch: int = 2000,
        interval: float = 1.0,
        recrawl_after: float | None = None,
        resume: str = "always",
        timeout: float = 0.25,
        join: bool = True,
    ) -> None:
        super().__init__()
        #: ``join=False``: a tool (``scrapy dedup explain``...) looks at an
        #: existing namespace; opening it records no run.
        self._join = join
        if persist not in ("kept", "seen"):
            raise ValueError(f"persist must be 'kept' or 'seen', not {persist!r}")
        if resume not in ("always", "after_crash"):
            raise ValueError(f"resume must be 'always' or 'after_crash', not {resume!r}")
        self.path = Path(path).absolute()  # as errors name it
        self.namespace = namespace
        self.persists_kept = persist == "kept"
        self.persistent = True
        #: Kept pages older than this many seconds are fetched again.
        self.recrawl_after = recrawl_after
        # The unfinished requests of the last run are fed to this one always
        # (SQLite), or only when it did not close (JOBDIR: after a pause,
        # Scrapy's own queue holds them).
        self._resume = resume
        self._expired = CompactMap()  # kept by an earlier run, past recrawl_after
        self._batch = batch
        self._interval = interval
        self._pending: dict[str, list[tuple[Any, ...]]] = {t: [] for t in [*_INSERT, "frontier"]}
        self._pending_count = 0
        self._holding: list[tuple[str, tuple[Any, ...]]] | None = None
        self._last_commit = time.monotonic()
        self._backoff = 0.0  # seconds, after the last failed write
        self._retry_at = 0.0  # no write is tried before this time.monotonic()
        self._near_loaded: dict[str, str] = {}  # method name -> index name
        self._near_saved: dict[str, int] = {}  # method name -> texts in its saved index
        self._stored_content = False  # earlier runs' digests are in the file
        #: False: ignore the near-duplicate index saved in the file (benchmarks).
        self.use_saved_index = True
        self._kept = CompactMap()  # keys written by keep_url() in this run
        self._frontier: list[tuple[int, str]] = []
        self._evidence_stored = 0  # records of learned-rule evidence earlier runs left
        self._evidence_count = 0  # ... and those of this run
        self._closed = False
        #: Called with the StoreError of a failed batch write, instead of raising
        #: it from the call that happened to trigger the write.
        self.on_write_error: Any = None
        self._lock_file: FileLock | None = None
        if not join and not self.path.is_file():
            raise StoreError(f"there is no dedup store at {self.path}")
        with contextlib.ExitStack() as undo:  # what is open so far, closed on failure
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._lock(namespace)
                undo.callback(self._unlock)
                self._refuse_hard_links()
                # A short busy timeout: another program's write lock fails a
                # flush fast into the backoff, rather than blocking the crawl.
                self._db = sqlite3.connect(
                    self.path, timeout=timeout, isolation_level=None, check_same_thread=False
                )
                undo.callback(self._db.close)
                self._check_and_create()
                self._ns = self._namespace_id(namespace)
                self._load()
            except (OSError, sqlite3.Error) as exc:
                raise self._open_error(exc) from exc
            undo.pop_all()

    @classmethod
    def from_uri(
        cls,
        uri: str,
        namespace: str,
        *,
        jobdir: str | None = None,
        prefix: str = "dedup",
        recrawl_after: float | None = None,
        timeout: float = 0.25,
        join: bool = True,
    ) -> SqliteStore:
        """``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (as
        in SQLAlchemy); ``%XX`` escapes are decoded, so ``%23`` is a ``#``.
        ``timeout`` (``DEDUP_STORE_TIMEOUT``) bounds the wait for another
        program's write lock."""
        uri = uri.strip()
        raw = uri[len("sqlite:///") :] if uri.lower().startswith("sqlite:///") else ""
        if not raw:
            raise ValueError(
                f"DEDUP_STORE={uri!r}: write sqlite:///relative/file.db or sqlite:////abs/file.db"
            )
        if "?" in raw or "#" in raw:
            raise ValueError(
                f"DEDUP_STORE={uri!r}: an SQLite store takes no query or fragment; write a "
                "'?' or '#' in the file name as %3F or %23"
            )
        path = unquote(raw)
        if path == ":memory:" or path.startswith("file:"):
            raise ValueError(
                f"DEDUP_STORE={uri!r} would keep nothing on disk: use DEDUP_STORE='memory' for "
                "state that ends with the process, or name a file"
            )
        return cls(
            path,
            namespace,
            persist="kept",
            recrawl_after=recrawl_after,
            timeout=timeout,
            join=join,
        )

    # -- opening ---------------------------------------------------------

    def _lock(self, namespace: str) -> None:
        """Lock ``<file>.<namespace hash>.lock`` (flock on Unix, msvcrt on
        Windows, through filelock): the lock dies with the process, and two
        opens of one namespace conflict even within one process. 64 bits of
        SHA-256, as namespaces whose CRC-32 collide would share a lock. The
        lock is beside the file a symlink points to, so that every name of
        the file takes one lock (hard links are refused: see
        :meth:`_refuse_hard_links`)."""
        tag = hashlib.sha256(namespace.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        # Not thread-local: a store opened on one thread may be closed on another.
        lock_path = f"{os.path.realpath(self.path)}.{tag}.lock"
        lock = FileLock(lock_path, timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout as exc:  # (an OSError too: first)
            self._check_lock_file(lock_path)
            raise StoreError(
                f"namespace {namespace!r} of {self.path} is in use by another process; "
                "run one crawl per namespace at a time (DEDUP_NAMESPACE), or use Redis "
                "to share state between processes"
            ) from exc
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise  # no permission: the caller's message says so
            # Another reason the lock file cannot be made (/proc), which
            # filelock 3.12 raises as it is, and newer ones as Timeout.
            raise self._lock_file_error(lock_path, exc) from None
        self._lock_file = lock

    def _check_lock_file(self, lock_path: str) -> None:
        """Raise the OS's reason when the lock file cannot be made at all
        (filelock reports that as a lock held elsewhere)."""
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._lock_file_error(lock_path, exc) from None
        os.close(fd)

    def _lock_file_error(self, lock_path: str, exc: OSError) -> StoreError:
        return StoreError(
            f"cannot create or open the dedup store {self.path} there: {exc.strerror} "
            f"({lock_path}); name a file in a directory this user can write"
        )

    def _refuse_hard_links(self) -> None:
        """Refuse a file with several hard links. SQLite keeps a file's
        journal (``-wal``, ``-shm``) under the name it was opened by, so two
        processes writing one file through two names do not see each other's
        writes and damage it; no lock file can tie two names of one file
        together (they may be in different directories), so the only safe
        answer is to use a file that has one name. A symlink is no problem:
        SQLite and the lock follow it to the file."""
        try:
            links = os.stat(self.path).st_nlink
        except FileNotFoundError:
            return
        if links > 1:
            raise StoreError(
                f"{self.path} has {links} hard links (other names for the same file): two "
                "crawls through two names of one SQLite file would write it without seeing "
                "each other's journal and damage it, so scrapy-dedup uses a file with one name "
                f"only. Remove the other names (find DIR -samefile {self.path} lists those "
                "under DIR), or use a copy (cp, not ln); a symlink is fine"
            )

    def _unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.release()
            self._lock_file = None

    def _open_error(self, exc: OSError | sqlite3.Error) -> StoreError:
        """The error for a file that cannot be opened, with the advice that
        fits: a lock held elsewhere passes, permissions need fixing, and only a
        damaged or foreign file is to be moved away."""
        cause = f"{exc} {getattr(exc, 'sqlite_errorname', '')}".lower()
        if isinstance(exc, sqlite3.Error) and ("locked" in cause or "busy" in cause):
            return StoreError(
                f"{self.path} is locked by another program (a sqlite3 shell, a backup?): "
                f"close it and run again ({exc})"
            )
        if (
            isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
        ) or any(word in cause for word in ("readonly", "read-only", "unable to open", "perm")):
            return StoreError(
                f"cannot write to {self.path} (read-only file or directory, or no permission: "
                f"{exc}): fix the permissions or point DEDUP_STORE elsewhere"
            )
        if any(word in cause for word in ("not a database", "malformed", "notadb", "corrupt")):
            return StoreError(
                f"{self.path} is not a readable scrapy-dedup SQLite store ({exc}); "
                "nothing was changed: move the file away or point DEDUP_STORE elsewhere"
            )
        return StoreError(f"cannot open the SQLite store {self.path}: {exc}")

    def _check_and_create(self) -> None:
        db = self._db
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        if app_id != _APPLICATION_ID:
            self._refuse_foreign(app_id)  # before anything is written to it
            if not self._join:  # a tool looks, and changes nothing
                raise StoreError(f"{self.path} has no namespace {self.namespace!r} (it has: none)")
            db.execute("PRAGMA journal_mode=WAL")
            self._make()
        else:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            self._refuse_newer(version)
            # A full check reads the whole file (about 0.6 s per GB): larger
            # files are checked by what is read, and damage found later is a
            # StoreError of the read or write that found it.
            size = self.path.stat().st_size
            problems = ["ok"]
            if size <= _CHECK_LIMIT:
                problems = [row[0] for row in db.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise StoreError(
                    f"{self.path} is damaged ({'; '.join(problems[:3])}); nothing was "
                    "changed: move it away (or recover it with sqlite3's .recover)"
                )
            db.execute("PRAGMA journal_mode=WAL")
            if version < _SCHEMA_VERSION:
                self._make()
        db.execute(
            "PRAGMA synchronous=NORMAL"
        )  # WAL + NORMAL: a killed process loses nothing committed

    def _make(self) -> None:
        """Make the file a store, or bring an older store to this schema, in
        one transaction with the application id and the schema version that
        mark it as ours: a kill -9 at any moment leaves the file as it was.
        A file an earlier version was stopped in the middle of making (its
        tables were committed one by one, its application id after them) is
        made again from nothing."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            # Again, in the transaction: another process may have made it meanwhile.
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if app_id == _APPLICATION_ID:
                self._refuse_newer(version)
            else:
                for kind, name in self._refuse_foreign(app_id):
                    if kind == "table":  # half-made and empty: its indexes go with it
                        db.execute(f'DROP TABLE "{name}"')
            if app_id != _APPLICATION_ID or version < _SCHEMA_VERSION:
                columns = {row[1] for row in db.execute("PRAGMA table_info(urls)")}
                for column, statement in _V3_COLUMNS.items():
                    if columns and column not in columns:
                        db.execute(statement)
                for statement in _STATEMENTS:
                    db.execute(statement)
                db.execute(f"PRAGMA application_id={_APPLICATION_ID}")
                db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    def _refuse_foreign(self, app_id: int) -> list[tuple[str, str]]:
        """Raise unless a file without our application id is empty, or one
        that an earlier version was killed in the middle of making: no
        application id, only tables and indexes of the schema (no column it
        does not have), and not one row in them. Returns those ``(type, name)``."""
        db = self._db
        found = db.execute(
            "SELECT type, name, tbl_name FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_autoindex_%'"
        ).fetchall()
        expected = _schema_objects()

        def ours(kind: str, name: str, table: str) -> bool:
            want = expected.get(name)
            if want is None or want[:2] != (kind, table):
                return False
            if kind != "table":
                return True
            columns = {row[1] for row in db.execute(f"PRAGMA table_info('{name}')")}
            empty = db.execute(f'SELECT 1 FROM "{name}" LIMIT 1').fetchone() is None
            return columns <= want[2] and empty

        if app_id or not all(ours(*row) for row in found):
            tables = sorted(name for kind, name, _ in found if kind == "table")
            raise StoreError(
                f"{self.path} is an SQLite database of something else (tables: "
                f"{', '.join(tables) or 'none'}); scrapy-dedup will not write "
                "into it: point DEDUP_STORE to a file of its own"
            )
        return [(kind, name) for kind, name, _ in found]

    def _refuse_newer(self, version: int) -> None:
        if version > _SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer scrapy-dedup (schema {version}); "
                "upgrade scrapy-dedup to use it"
            )

    def _namespace_id(self, namespace: str) -> int:
        if not self._join:
            row = self._db.execute(
                "SELECT id FROM namespaces WHERE name = ?", (namespace,)
            ).fetchone()
            if row is None:
                names = [r[0] for r in self._db.execute("SELECT name FROM namespaces")]
                raise StoreError(
                    f"{self.path} has no namespace {namespace!r} "
                    f"(it has: {', '.join(map(repr, sorted(names))) or 'none'})"
                )
            return int(row[0])
        self._db.execute("INSERT OR IGNORE INTO namespaces (name) VALUES (?)", (namespace,))
        row = self._db.execute("SELECT id FROM namespaces WHERE name = ?", (namespace,)).fetchone()
        return int(row[0])

    def _load(self) -> None:
        db, ns = self._db, self._ns
        rows = db.execute("SELECT key, info, kept_at FROM urls WHERE ns = ?", (ns,)).fetchall()
        if rows:
            table = np.array(rows, dtype=np.int64)
            keys, infos = table[:, 0].view(np.uint64), table[:, 1].view(np.uint64)
            fresh = table[:, 2] != _FORGOTTEN
            if self.recrawl_after is not None and self.persists_kept:
                fresh &= table[:, 2] >= int(time.time() - self.recrawl_after)
            self._expired.update(keys[~fresh], infos[~fresh])
            self._urls.update(keys[fresh], infos[fresh] | np.uint64(PREVIOUS_RUN))
        # Digests of earlier runs are looked up in the file (one indexed read
        # per item), not read into memory: a store of millions of texts opens at once.
        texts = db.execute("SELECT count(*) FROM content WHERE ns = ?", (ns,)).fetchone()[0]
        self._stored_content = bool(texts)
        # Texts recorded before the normalization was versioned are version 1.
        row = db.execute("SELECT version FROM text_version WHERE ns = ?", (ns,)).fetchone()
        recorded = row[0] if row else 1
        if texts and recorded < TEXT_VERSION:
            warn_old_texts(f"{self.path}, namespace {self.namespace!r}", recorded, TEXT_VERSION)
        if self._join:
            db.execute("INSERT OR REPLACE INTO text_version VALUES (?, ?)", (ns, TEXT_VERSION))
        row = db.execute("SELECT clean FROM runs WHERE ns = ?", (ns,)).fetchone()
        self.last_run_closed = bool(row and row[0])
        if self._join:
            db.execute("INSERT OR REPLACE INTO runs VALUES (?, 0)", (ns,))
        # After a pause (JOBDIR), Scrapy's queue holds what was unfinished:
        # only failed requests are fed to the next run.
        self.resume_all = not (self._resume == "after_crash" and self.last_run_closed)
        row = db.execute("SELECT count(*) FROM evidence WHERE ns = ?", (ns,)).fetchone()
        self._evidence_stored = self._evidence_count = row[0]
        pending = db.execute("SELECT key, request FROM pending WHERE ns = ?", (ns,))
        self._frontier = [(key & _U64, request) for key, request in pending]
        for key, owner in db.execute("SELECT key, owner FROM claims WHERE ns = ?", (ns,)):
            self._claims.setdefault(key & _U64, owner)
        for key, data in db.execute(
            "SELECT key, fingerprint FROM filed WHERE ns = ? ORDER BY rowid", (ns,)
        ):
            self._filed.setdefault(key & _U64, []).append(bytes(data))
        expired = (
            f" ({len(self._expired)} to fetch again: forgotten, or past DEDUP_RECRAWL_AFTER)"
            if self._expired
            else ""
        )
        what = "pages kept" if self.persists_kept else "URLs seen"
        self._summary = (
            f"{self.path.resolve()}, namespace {self.namespace!r}: {len(rows)} {what}{expired} "
            f"and {texts} texts from earlier runs, "
            f"{len(self._frontier)} unfinished requests"
            + (
                f", {self._evidence_stored} pages of learned-rule evidence"
                if self._evidence_stored
                else ""
            )
            + (
                " to resume"
                if self.resume_all
                else " (the last run closed: only failed ones resume)"
            )
        )

    def describe(self) -> str:
        return self._summary

    def expired(self, key: int) -> bool:
        return key in self._expired

    def _near_state(self, method: NearMethod) -> tuple[NearIndex, StringList]:
        if method.name not in self._near_loaded:
            self._near_loaded[method.name] = method.index_name
            after = 0
            if self.use_saved_index:
                restored = self._restore_near(method)
                if restored is not None:
                    after, index, urls = restored
                    self._near[method.name] = (index, urls)
                    self._near_saved[method.name] = len(urls)
            state = super()._near_state(method)
            self._load_near(method, *state, after=after)
            return state
        return super()._near_state(method)

    def _saved_path(self, index_name: str) -> Path:
        """The file beside the store where the near-duplicate index is saved."""
        return self.path.with_name(f"{self.path.name}-near-{self._ns}-{index_name}")

    def _restore_near(self, method: NearMethod) -> tuple[int, NearIndex, StringList] | None:
        """The index saved by an earlier run's close, if it still matches the
        stored fingerprints it was made of: ``(last rowid it holds, index, URLs)``."""
        index: Any = method.new_index()  # a MinHashLSH: the others are not saved
        path = self._saved_path(method.index_name)
        if not hasattr(index, "restore") or not path.exists():
            return None
        try:
            with path.open("rb") as file:
                meta, sections = _read_saved(file)
                if meta.get("format") != _SAVED_FORMAT or meta.get("method") != method.name:
                    return None
                last, count = int(meta["last_rowid"]), int(meta["count"])
                # Still the rows it was made of (a table cleared and refilled has others).
                held = self._db.execute(
                    "SELECT count(*) FROM near WHERE ns = ? AND method = ? AND rowid <= ?",
                    (self._ns, method.name, last),
                ).fetchone()[0]
                row = self._db.execute(
                    "SELECT fingerprint, url FROM near WHERE rowid = ? AND ns = ? AND method = ?",
                    (last, self._ns, method.name),
                ).fetchone()
                if held != count or row is None or _row_check(*row) != meta["check"]:
                    logger.debug("%s is stale: indexing the stored texts anew", path)
                    return None
                index.restore(sections["entries"], sections["sketches"])
                urls = StringList.from_packed(sections["urls"].tobytes(), sections["url_ends"])
            if len(index) != count or len(urls) != count:
                raise ValueError(f"{len(index)} texts and {len(urls)} URLs, not {count}")
        except (OSError, KeyError, TypeError, ValueError, IndexError) as exc:
            logger.warning("%s is unreadable (%s): indexing the stored texts anew", path, exc)
            return None
        return last, index, urls

    def _save_near(self) -> None:
        """Save the near-duplicate indexes that grew by enough since they were
        saved (or indexed anew), beside the store file, for the next open."""
        for name, index_name in self._near_loaded.items():
            state = self._near.get(name)
            if state is None or not hasattr(state[0], "saved_parts"):
                continue
            index: Any = state[0]
            urls = state[1]
            saved = self._near_saved.get(name, 0)
            if len(urls) - saved < max(_SAVE_MIN, saved // 16):
                continue
            last, count = self._db.execute(
                "SELECT max(rowid), count(*) FROM near WHERE ns = ? AND method = ?",
                (self._ns, name),
            ).fetchone()
            if count != len(urls):  # held writes discarded, unreadable rows: not this one
                logger.debug("%s texts stored, %s indexed: index not saved", count, len(urls))
                continue
            row = self._db.execute(
                "SELECT fingerprint, url FROM near WHERE rowid = ?", (last,)
            ).fetchone()
            meta = {
                "format": _SAVED_FORMAT,
                "method": name,
                "index_name": index_name,
                "last_rowid": last,
                "count": count,
                "check": _row_check(*row),
            }
            pieces, ends = urls.packed()
            parts = [*index.saved_parts(), ("url_ends", ends)]
            parts += [("urls", np.frombuffer(piece, dtype=np.uint8)) for piece in pieces]
            _write_saved(self._saved_path(index_name), meta, parts)
            self._near_saved[name] = count

    def _load_near(
        self, method: NearMethod, index: NearIndex, urls: StringList, after: int = 0
    ) -> None:
        """Index the fingerprints earlier runs kept with ``method`` (those
        after rowid ``after``: the saved index holds the others)."""
        rows = self._db.execute(
            "SELECT fingerprint, url FROM near WHERE ns = ? AND method = ? AND rowid > ? "
            "ORDER BY rowid",
            (self._ns, method.name, after),
        )
        load_many = getattr(index, "add_many", None)
        decode_many = getattr(method, "decode_many", None)
        size = _LOAD_BATCH
        # Each bulk load merges with what the index holds: batches as large as
        # the index so far keep the whole load linear, and its memory bounded.
        while batch := rows.fetchmany(size):
            size = max(size, len(urls) + len(batch))
            blobs = [bytes(data) for data, _ in batch]
            first = len(urls)
            if load_many is not None and decode_many is not None:
                try:
                    values, sketches = decode_many(blobs)
                except ValueError:  # a row of other parameters: one by one below
                    pass
                else:
                    urls.extend([url for _, url in batch])
                    load_many(values, sketches, range(first, first + len(batch)))
                    continue
            for data, url in zip(blobs, (url for _, url in batch), strict=True):
                try:
                    fingerprint = method.decode(data)
                except ValueError:  # written with other parameters: not comparable
                    continue
                index.add(fingerprint, len(urls))
                urls.append(url)
        old = self._db.execute(
            "SELECT count(*) FROM near WHERE ns = ? AND method = ?", (self._ns, "minhash")
        ).fetchone()[0]
        if old and method.name == "minhash2":
            warn_old_fingerprints(f"{self.path}, namespace {self.namespace!r}", old)

    # -- writes ------------------------------------------------------------

    def _write(self, table: str, row: tuple[Any, ...]) -> None:
        if self._holding is not None:
            self._holding.append((table, row))
            return
        self._pending[table].append(row)
        self._pending_count += 1
        if self._retry_at and time.monotonic() < self._retry_at:
            return  # a write failed: answers come from memory, the rows wait
        if self.flush_due is not None:
            # In a crawl: everything recorded in this reactor turn (a page,
            # the requests and texts it led to) commits together at its end,
            # so a kill -9 repeats at most the pages in flight.
            self.flush_due()
            return
        if (
            self._pending_count >= self._batch
            or time.monotonic() - self._last_commit >= self._interval
        ):
            try:
                self.flush()
            except StoreError as exc:
                if self.on_write_error is None:
                    raise
                self.on_write_error(exc)

    def add_url(self, key: int, info: int) -> int | None:
        first = self._urls.setdefault(key, info)
        if first is None and not self.persists_kept:
            self._write("urls", (self._ns, _signed(key), info & ~PREVIOUS_RUN, 0, None))
        return first

    def keep_url(self, key: int, info: int, url: str | None = None) -> None:
        if not self.persists_kept:  # every key seen is written already
            self.add_url(key, info)
            return
        first = self._urls.setdefault(key, info)
        if (first is not None and first & PREVIOUS_RUN) or key in self._kept:
            return  # on disk already
        self._kept.setdefault(key, 1)
        info = (first or info) & ~PREVIOUS_RUN
        self._write("urls", (self._ns, _signed(key), info, int(time.time()), url))

    def forget(
        self,
        keys: Iterable[int] = (),
        prefix: str | None = None,
        key_of: Callable[[str], int] | None = None,
    ) -> list[str]:
        """Forget the kept pages of ``keys`` and every kept page whose URL
        starts with ``prefix`` (case-sensitive), so that the next run fetches
        them again. Returns their URLs (a key written before version 3 has none)."""
        db, ns = self._db, self._ns
        targets = {_signed(key) for key in keys}
        if prefix:
            rows = db.execute(
                "SELECT key FROM urls WHERE ns = ? AND substr(url, 1, ?) = ?",
                (ns, len(prefix), prefix),
            )
            targets.update(row[0] for row in rows)
        forgotten = []
        with db:  # marked, not deleted: the next run compares the page's text
            db.execute("BEGIN")
            for key in targets:
                row = db.execute(
                    "UPDATE urls SET kept_at = ? WHERE ns = ? AND key = ? AND kept_at != ? "
                    "RETURNING url",
                    (_FORGOTTEN, ns, key, _FORGOTTEN),
                ).fetchone()
                if row is not None:
                    forgotten.append(row[0] or f"key {key & _U64:016x}")
        return forgotten

    def end_run(self) -> None:
        self._write("runs", (self._ns, 1))

    def kept_as(self, key: int) -> str | None:
        row = self._db.execute(
            "SELECT url FROM urls WHERE ns = ? AND key = ?", (self._ns, _signed(key))
        ).fetchone()
        return row[0] if row else None

    def inventory(self, top: int = 10) -> dict[str, Any]:
        db, ns = self._db, self._ns

        def count(sql: str, *args: Any) -> int:
            return int(db.execute(sql, (ns, *args)).fetchone()[0])

        urls = "pages kept" if self.persists_kept else "URL keys seen"
        counts = {
            urls: count("SELECT count(*) FROM urls WHERE ns = ?"),
            "of them forgotten (fetched again next run)": count(
                "SELECT count(*) FROM urls WHERE ns = ? AND kept_at = ?", _FORGOTTEN
            ),
            "of them past DEDUP_RECRAWL_AFTER": len(self._expired)
            - count("SELECT count(*) FROM urls WHERE ns = ? AND kept_at = ?", _FORGOTTEN),
            "texts (exact digests)": count("SELECT count(*) FROM content WHERE ns = ?"),
            "near-duplicate fingerprints": count("SELECT count(*) FROM near WHERE ns = ?"),
            "unfinished requests (frontier)": count("SELECT count(*) FROM pending WHERE ns = ?"),
            "learned-rule evidence records": count("SELECT count(*) FROM evidence WHERE ns = ?"),
        }
        hosts: Counter[str] = Counter()
        for (url,) in db.execute("SELECT url FROM urls WHERE ns = ? AND url IS NOT NULL", (ns,)):
            hosts[urlsplit(url).hostname or "(none)"] += 1
        return {"counts": counts, "hosts": [list(pair) for pair in hosts.most_common(top)]}

    def claim(self, key: int, owner: int) -> int | None:
        first = super().claim(key, owner)
        if first is None and not self.persists_kept:
            self._write("claims", (self._ns, _signed(key), owner))
        return first

    def get_content(self, digest: bytes) -> str | None:
        first = self._content.get(digest)
        if first is None and self._stored_content:
            try:
                row = self._db.execute(
                    "SELECT url FROM content WHERE ns = ? AND digest = ?", (self._ns, digest)
                ).fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the SQLite store {self.path}: {exc}") from exc
            if row is not None:
                first = row[0]
        return first

    def add_content(self, digest: bytes, url: str) -> str | None:
        first = self.get_content(digest)
        if first is None:
            self._content[digest] = url
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

    # Frontier rows wait in call order: the last call for a key wins, so a
    # request given up and scheduled again in one batch keeps its row.
    keeps_evidence = True

    def exchange_evidence(self, records: list[str], start: int) -> tuple[list[str], int]:
        # One process writes the file: what it appends needs no reading back.
        found: list[str] = []
        if start < self._evidence_stored:
            try:
                found = [
                    row[0]
                    for row in self._db.execute(
                        "SELECT record FROM evidence WHERE ns = ? ORDER BY rowid LIMIT ? OFFSET ?",
                        (self._ns, self._evidence_stored - start, start),
                    )
                ]
            except sqlite3.Error as exc:
                raise StoreError(
                    f"cannot read the learned-rule evidence of {self.path}: {exc}"
                ) from exc
        for record in records:
            self._write("evidence", (self._ns, record))
        self._evidence_count += len(records)
        return found + list(records), max(start, self._evidence_count)

    def add_pending(self, key: int, request: str) -> None:
        self._write("frontier", (_signed(key), request))

    def done_pending(self, key: int) -> None:
        self._write("frontier", (_signed(key), None))

    def pending_requests(self) -> list[tuple[int, str]]:
        found, self._frontier = self._frontier, []
        return found

    def clear_pending(self) -> None:
        for table in ("frontier",):
            self._pending_count -= len(self._pending[table])
            self._pending[table].clear()
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute("DELETE FROM pending WHERE ns = ?", (self._ns,))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write to the SQLite store {self.path}: {exc}") from exc

    def release(self, token: Any) -> None:
        for table, row in token or ():
            self._write(table, row)

    def discard(self, token: Any) -> None:
        if token:
            token.clear()

    def flush(self, force: bool = False) -> None:
        """Write the waiting records in one transaction. After a failed write,
        nothing is tried until the backoff ends (each try rewrites the whole
        backlog), unless ``force`` (on :meth:`close`)."""
        if not self._pending_count:
            self._last_commit = time.monotonic()
            return
        if self._retry_at and time.monotonic() < self._retry_at and not force:
            return
        try:
            with self._db:  # one transaction
                self._db.execute("BEGIN")
                for table, rows in self._pending.items():
                    if rows and table != "frontier":
                        self._db.executemany(_INSERT[table], rows)
                last = dict(self._pending["frontier"])
                self._db.executemany(
                    _INSERT["pending"], [(self._ns, k, r) for k, r in last.items() if r]
                )
                self._db.executemany(
                    _INSERT["done"], [(self._ns, k) for k, r in last.items() if r is None]
                )
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):  # Python 3.10 leaves a failed COMMIT open
                self._db.rollback()
            self._backoff = min(2 * self._backoff or _BACKOFF_FIRST, _BACKOFF_MAX)
            self._retry_at = time.monotonic() + self._backoff
            raise StoreError(
                f"cannot write to the SQLite store {self.path}: {exc}; {self._pending_count} "
                f"records wait in memory, next try in {self._backoff:g} s"
            ) from exc
        for rows in self._pending.values():
            rows.clear()
        self._pending_count = 0
        self._last_commit = time.monotonic()
        self._backoff = self._retry_at = 0.0

    def clear(self, urls_only: bool = False) -> None:
        super().clear(urls_only)
        self._kept.clear()
        tables = ["urls"] if urls_only else [t for t in _INSERT if t != "done"]
        for table in [*tables, "frontier"]:
            self._pending_count -= len(self._pending[table])
            self._pending[table].clear()
        if not urls_only:
            self._frontier.clear()
            self._evidence_stored = self._evidence_count = 0
            self._stored_content = False
            self._near_saved.clear()
            for saved in self.path.parent.glob(f"{self.path.name}-near-{self._ns}-*"):
                saved.unlink(missing_ok=True)
        with self._db:
            self._db.execute("BEGIN")
            for table in tables:
                self._db.execute(f"DELETE FROM {table} WHERE ns = ?", (self._ns,))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(force=True)
            try:
                self._save_near()
            except (OSError, sqlite3.Error) as exc:  # a cache: the next open indexes anew
                logger.warning("%s: the near-duplicate index was not saved: %s", self.path, exc)
        finally:
            self._db.close()
            self._unlock()
