"""GuardedStore: a store whose failures do not lose data. No Scrapy import."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from scrapy_dedup.stores.base import Adoption, DedupStore, StoreError
from scrapy_dedup.stores.memory import MemoryStore

if TYPE_CHECKING:
    from scrapy_dedup.text.near import NearMethod

__all__ = ["GuardedStore"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

_RETRY_AFTER = 5.0  # seconds a failed store is bypassed before it is tried again
_EVIDENCE_BACKLOG = 100_000  # learned-rule evidence records kept for a store that is down
_OUTAGE_BACKLOG = 100_000  # texts and fingerprints kept locally, written once the store answers


class _Held:
    """The token of :meth:`GuardedStore.hold`: the store's own token, and the
    texts the local store recorded meanwhile (the store was down)."""

    __slots__ = ("local", "store")

    def __init__(self, store: Any) -> None:
        self.store = store
        self.local: list[tuple[bytes, str]] = []

    def __bool__(self) -> bool:
        return bool(self.store) or bool(self.local)


class GuardedStore(DedupStore):
    """Wraps a store so that its failures do not lose data.

    A failed call is counted (``count("dedup/store/errors")``), logged, and
    answered by a process-local memory store instead (the store's
    :meth:`~DedupStore.fallback`, which knows what this process knew), as
    plain Scrapy would answer: the crawl still ends (a site's links loop
    back), but loses the shared state (other workers, earlier runs). By
    ``on_error`` the crawl goes on ("continue": a background thread asks the
    store every few seconds whether it answers again) or is stopped cleanly
    ("stop": ``stop()`` is called once).
    """

    def __init__(
        self,
        store: DedupStore,
        uri: str,
        on_error: str,
        *,
        count: Callable[[str], None],
        stop: Callable[[], None],
    ) -> None:
        self.store = store
        self.uri = uri
        self.on_error = on_error
        self.persists_kept = store.persists_kept
        self.persistent = store.persistent
        self.lease_interval = store.lease_interval
        self.worker = store.worker
        self._count = count
        self._stop = stop
        self._stopping = False
        self._down_until = 0.0
        self._failures = 0
        self._last_logged = 0.0
        local = store.fallback()
        self._local = MemoryStore() if local is None else local
        self._probe: threading.Thread | None = None
        self._evidence: list[str] = []  # evidence records the store has not taken yet
        self._answered = threading.Event()  # set by the probe when the store answers
        # Kept from the local store while the store was down, written to it
        # once it answers (see _write_back): exact texts whose items came out,
        # near-duplicate fingerprints as the store records them (at once).
        self._held_local: list[tuple[bytes, str]] | None = None
        self._outage_texts: dict[bytes, str] = {}
        self._outage_near: list[tuple[NearMethod, Any, str]] = []
        self._outage_seen = False  # the local store answered for texts at least once
        if hasattr(store, "on_lost_state"):
            store.on_lost_state = self._lost_state
        for _ in range(getattr(store, "lost_state", 0)):  # found while it opened
            self._lost_state()
        if hasattr(store, "on_write_error"):
            # SQLite answers from memory: a failed write (disk full) loses no
            # answer, so it is counted and retried, not bypassed.
            store.on_write_error = self._write_failed

    def _guard(
        self, call: Callable[P, T], local: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``call(*args)`` on the store, or ``local(*args)`` on the local one
        while the store is down or when it fails."""
        if self._down_until and not self._recovered():
            self._count("dedup/store/bypassed")
            return local(*args, **kwargs)
        try:
            return call(*args, **kwargs)
        except StoreError as exc:
            self._failed(exc)
            return local(*args, **kwargs)

    def _durable(self, call: Callable[[], None]) -> None:
        """A write that only makes records durable: a failure loses no answer."""
        try:
            call()
        except StoreError as exc:
            self._failed(exc, bypass=False)

    def _recovered(self) -> bool:
        """Whether a store that failed answers again. It is asked from a
        background thread (one at a time, every ``_RETRY_AFTER`` s): asked
        here, on Scrapy's reactor thread, a frozen server would stall the
        crawl for a whole timeout each time."""
        if self.on_error == "stop":
            return False
        if self._answered.is_set():
            self._answered.clear()
            self._down_until = 0.0
            logger.warning(
                "Dedup store %s answers again: deduplicating with it again (the texts this "
                "process kept while it was down are written to it; the URLs it recorded "
                "stay known to this process only)",
                self.uri,
            )
            return True
        now = time.monotonic()
        if now >= self._down_until and not (self._probe and self._probe.is_alive()):
            self._down_until = now + _RETRY_AFTER
            self._probe = threading.Thread(target=self._ask, name="dedup-store-probe", daemon=True)
            self._probe.start()
        return False

    def _ask(self) -> None:
        """The probe thread: set ``_answered`` if the store answers a ping."""
        try:
            self.store.ping()
        except Exception:  # whatever it raises, it does not answer (yet)
            return
        self._answered.set()

    def _write_failed(self, exc: StoreError) -> None:
        self._failed(exc, bypass=False)

    def _failed(self, exc: StoreError, *, bypass: bool = True) -> None:
        self._failures += 1
        self._count("dedup/store/errors")
        now = time.monotonic()
        if bypass:
            self._down_until = now + _RETRY_AFTER
        if self.on_error == "stop":
            if not self._stopping:
                self._stopping = True
                logger.error("%s; stopping the crawl (DEDUP_STORE_ON_ERROR='stop')", exc)
                self._stop()
            return
        if self._failures == 1 or now - self._last_logged >= 60:
            self._last_logged = now
            self._log_failure(exc, bypass)

    def _log_failure(self, exc: StoreError, bypass: bool) -> None:
        if not bypass:
            logger.error(
                "%s; deduplicating on from memory, the records wait to be written "
                "(%d store errors so far, see dedup/store/errors): if the crawl ends "
                "first, the next run does not know them",
                exc,
                self._failures,
            )
            return
        logger.error(
            "%s; crawling on WITHOUT the shared dedup state (%d store errors so far, "
            "see dedup/store/errors): this process dedups on its own until the store "
            "answers again, so pages and texts seen elsewhere or earlier are fetched "
            "and kept again. Set DEDUP_STORE_ON_ERROR='stop' to stop the crawl instead.",
            exc,
            self._failures,
        )

    def add_url(self, key: int, info: int) -> int | None:
        if self._down_until:
            return self._guard(self.store.add_url, self._local.add_url, key, info)
        try:  # _guard() inlined: this runs for every request
            return self.store.add_url(key, info)
        except StoreError as exc:
            self._failed(exc)
            return self._local.add_url(key, info)

    def get_url(self, key: int) -> int | None:
        return self._guard(self.store.get_url, self._local.get_url, key)

    # Records for later runs (kept pages, the frontier) always go to the store,
    # even while it is bypassed: the built-in stores only buffer them, and keep
    # them through a failed flush. A kept page whose links went to the local
    # store instead would lose them after a kill -9.

    def keep_url(self, key: int, info: int, url: str | None = None) -> None:
        self._local.keep_url(key, info, url)
        self._durable(lambda: self.store.keep_url(key, info, url))

    def expired(self, key: int) -> bool:
        return self._guard(self.store.expired, self._local.expired, key)

    def forget(
        self,
        keys: Iterable[int] = (),
        prefix: str | None = None,
        key_of: Callable[[str], int] | None = None,
    ) -> list[str]:
        return self.store.forget(keys, prefix, key_of)

    def describe(self) -> str:
        return self.store.describe()

    def end_run(self) -> None:
        self._durable(self.store.end_run)

    def url_count(self) -> int:
        return self.store.url_count()

    def get_content(self, digest: bytes) -> str | None:
        if self._outage_seen:  # a text kept during an outage stays a known one
            first = self._local.get_content(digest)
            if first is not None:
                return first
        return self._guard(self.store.get_content, self._local.get_content, digest)

    def add_content(self, digest: bytes, url: str) -> str | None:
        if self._outage_seen:
            first = self._local.get_content(digest)
            if first is not None:
                return first
        return self._guard(self.store.add_content, self._add_local_content, digest, url)

    def _add_local_content(self, digest: bytes, url: str) -> str | None:
        """``add_content`` on the local store while the store is down: a new
        text waits, with its item, to be written to the store once it answers."""
        self._outage_seen = True
        first = self._local.add_content(digest, url)
        if first is None:
            if self._held_local is not None:
                self._held_local.append((digest, url))
            elif len(self._outage_texts) < _OUTAGE_BACKLOG:
                self._outage_texts[digest] = url
        return first

    def use_near(self, method: NearMethod) -> None:
        # Not guarded: a crawl that cannot use the store's texts does not start.
        self.store.use_near(method)

    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        found = self._guard(self.store.match_near, self._local.match_near, method, fingerprint)
        if found is None and self._outage_seen and not self._down_until:
            # A text kept during an outage, not written to the store yet.
            found = self._local.match_near(method, fingerprint)
        return found

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        self._guard(self.store.add_near, self._add_local_near, method, fingerprint, url)

    def _add_local_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        self._outage_seen = True
        self._local.add_near(method, fingerprint, url)
        if len(self._outage_near) < _OUTAGE_BACKLOG:
            self._outage_near.append((method, fingerprint, url))

    def claim(self, key: int, owner: int) -> int | None:
        return self._guard(self.store.claim, self._local.claim, key, owner)

    def add_filed(self, key: int, data: bytes) -> bool:
        return self._guard(self.store.add_filed, self._local.add_filed, key, data)

    def filed(self, key: int) -> list[bytes]:
        return self._guard(self.store.filed, self._local.filed, key)

    @property
    def keeps_evidence(self) -> bool:  # type: ignore[override]
        return self.store.keeps_evidence

    def exchange_evidence(self, records: list[str], start: int) -> tuple[list[str], int]:
        # While the store is down this process learns on its own, from where
        # the log was, and keeps its records: appended once the store answers
        # (read back then, they change nothing: the learner has them).
        if not self._down_until or self._recovered():
            try:
                found = self.store.exchange_evidence(self._evidence + records, start)
            except StoreError as exc:
                self._failed(exc)
            else:
                self._evidence = []
                return found
        else:
            self._count("dedup/store/bypassed")
        if len(self._evidence) < _EVIDENCE_BACKLOG:
            self._evidence += records[: _EVIDENCE_BACKLOG - len(self._evidence)]
        return self._local.exchange_evidence(records, start)

    def add_pending(self, key: int, request: str) -> None:
        self._durable(lambda: self.store.add_pending(key, request))

    def done_pending(self, key: int) -> None:
        self._durable(lambda: self.store.done_pending(key))

    @property
    def resume_all(self) -> bool:  # type: ignore[override]
        return self.store.resume_all

    def pending_requests(self) -> list[tuple[int, str]]:
        return self._guard(self.store.pending_requests, self._local.pending_requests)

    def clear_pending(self) -> None:
        self._durable(self.store.clear_pending)

    # Leases: while the store is down, nothing is renewed or adopted.

    def keep_lease(self) -> None:
        self._guard(self.store.keep_lease, self._local.keep_lease)

    def release_lease(self) -> None:
        self._durable(self.store.release_lease)

    def own_row(self, key: int) -> None:
        self._durable(lambda: self.store.own_row(key))

    def adopt(self) -> list[Adoption]:
        return self._guard(self.store.adopt, self._local.adopt)

    def readmit(self, key: int) -> None:
        self.store.readmit(key)

    def readmit_link(self, key: int) -> None:
        self._guard(self.store.readmit_link, self._local.readmit_link, key)

    def awaiting_adoption(self) -> bool:
        return self._guard(self.store.awaiting_adoption, self._local.awaiting_adoption)

    @contextlib.contextmanager
    def hold(self) -> Iterator[Any]:
        with self.store.hold() as token:
            held = _Held(token)
            outer, self._held_local = self._held_local, held.local
            try:
                yield held
            finally:
                self._held_local = outer

    def release(self, token: Any) -> None:
        if isinstance(token, _Held):
            for digest, url in token.local[: _OUTAGE_BACKLOG - len(self._outage_texts)]:
                self._outage_texts[digest] = url
            token = token.store
        self._durable(lambda: self.store.release(token))

    def discard(self, token: Any) -> None:
        if isinstance(token, _Held):
            for digest, url in token.local:  # the item never came out: no text of it stays
                if self._local._content.get(digest) == url:
                    del self._local._content[digest]
            token = token.store
        self.store.discard(token)

    def clear(self, urls_only: bool = False) -> None:
        self.store.clear(urls_only)
        self._local.clear(urls_only)

    def flush(self) -> None:
        if self._down_until and not self._recovered():
            return  # the writes wait in the store: each try would stall a timeout
        if self._outage_texts or self._outage_near:
            self._write_back()
        self._durable(self.store.flush)

    def _write_back(self) -> None:
        """Write to the store the texts and fingerprints kept from the local
        store while it was down, so that neither this process nor any other
        keeps them once more. A text another worker kept meanwhile was kept
        twice already; it is counted (``dedup/store/outage_doubled``). The
        local store still answers for them (the store may fail again)."""
        if self.store._holding is not None:
            return  # inside an item's hold(): its writes would join that item's
        texts, near = self._outage_texts, self._outage_near
        written = doubled = done = 0
        try:
            while texts:
                digest, url = texts.popitem()
                try:
                    first = self.store.add_content(digest, url)
                except StoreError:
                    texts[digest] = url  # tried again once the store answers
                    raise
                written += 1
                if first is not None and first != url:
                    doubled += 1
            for method, fingerprint, url in near:
                self.store.add_near(method, fingerprint, url)
                done += 1
        except StoreError as exc:
            self._failed(exc)
        del near[:done]
        if written:
            self._count_n("dedup/store/outage_texts", written)
            logger.info(
                "Dedup store %s: wrote the %d texts kept while it was down (%d of them "
                "another process had kept meanwhile)",
                self.uri,
                written,
                doubled,
            )
        if doubled:
            self._count_n("dedup/store/outage_doubled", doubled)

    def _count_n(self, name: str, n: int) -> None:
        for _ in range(n):
            self._count(name)

    def _lost_state(self) -> None:
        """The store found that its server lost data (see RedisStore)."""
        self._count("dedup/store/lost_state")

    def close(self) -> None:
        if self._probe is not None:  # it would use the store closed under it
            self._probe.join(_RETRY_AFTER)
        up = not self._down_until or self._answered.is_set()
        if up and (self._outage_texts or self._outage_near):
            self._write_back()
        self._durable(self.store.close)
