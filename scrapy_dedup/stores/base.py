"""The interface every dedup store implements. No Scrapy import.

Components never talk to a database directly: they hold a store and ask it to
record a key. Keys are 64-bit integers (hashes computed by the caller), values
small integers the caller packs (:class:`scrapy_dedup.keys.Info`); a store only
remembers the first value recorded for a key.
"""

from __future__ import annotations

import contextlib
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

    from scrapy_dedup.stores.memory import MemoryStore
    from scrapy_dedup.text.near import NearMethod

__all__ = ["FILED_LIMIT", "Adoption", "DedupStore", "StoreError", "redact"]

logger = logging.getLogger(__name__)

#: Fingerprints kept per canonical URL: a page's first items are enough to
#: compare a later variant against.
FILED_LIMIT = 32


class StoreError(Exception):
    """A store cannot do what was asked: unreachable, corrupt, foreign..."""


@dataclass(frozen=True)
class Adoption:
    """A worker whose lease ran out, taken over by this one: its frontier
    rows (``(key, request)`` as :meth:`DedupStore.pending_requests` gives
    them; none when it left none) and what it skipped on trust."""

    worker: str
    rows: list[tuple[int, str]]
    #: The workers it had taken over in turn (their skips are owed here too).
    took: tuple[str, ...] = ()


class DedupStore(ABC):
    """The interface every store implements (the components' only way to state).

    - URL keys: :meth:`add_url` records a request key and returns ``None``
      when it is new, else the info recorded with it first.
    - Texts: :meth:`add_content` does the same for exact text digests,
      remembering the first URL; :meth:`match_near` and :meth:`add_near` find
      and keep near-duplicate fingerprints (a :class:`NearMethod` tells how).
    - rel=canonical: :meth:`claim` records which page was filed first under a
      canonical URL; :meth:`add_filed`/:meth:`filed` keep encoded
      fingerprints of the items filed there. Both live apart from the URL keys.
    - A store that outlives the run keeps a frontier (:meth:`add_pending`...)
      and may hold writes back until the item that caused them is safely out
      of the pipelines: writes made inside :meth:`hold` become durable on
      :meth:`release` and are forgotten on :meth:`discard` (they still count
      for the rest of this run).

    A third-party store is a subclass that implements the abstract methods
    and :meth:`from_uri`, named in ``DEDUP_STORE_CLASSES``.
    """

    #: Whether URL keys survive the run only for pages whose items were kept
    #: (:meth:`keep_url`), not every key seen (SQLite; see docs/recrawls.md).
    persists_kept = False
    #: Whether the store outlives the run (SQLite, JOBDIR, Redis): it keeps a
    #: frontier of unfinished requests for the next run, written by
    #: :class:`~scrapy_dedup.frontier.DedupFrontierMiddleware`.
    persistent = False
    #: Set by the owner of a store that batches writes: called when a batch is
    #: due, instead of writing it at once; the owner then calls :meth:`flush`
    #: soon, so that what is recorded in one reactor turn commits together.
    flush_due: Any = None

    @classmethod
    def from_uri(
        cls, uri: str, namespace: str, *, jobdir: str | None = None, prefix: str = "dedup"
    ) -> Self:
        """The store a ``DEDUP_STORE`` URI names, for ``namespace``.

        Raises ``ValueError`` for a URI it cannot read (naming ``DEDUP_STORE``)
        and :class:`StoreError` when the store cannot be used."""
        raise ValueError(f"DEDUP_STORE={redact(uri)!r}: {cls.__name__} cannot be built from a URI")

    @abstractmethod
    def add_url(self, key: int, info: int) -> int | None:
        """Record ``key``: ``None`` when new, else the info recorded first."""

    @abstractmethod
    def get_url(self, key: int) -> int | None:
        """The info recorded with ``key``, ``None`` when unknown."""

    def keep_url(self, key: int, info: int, url: str | None = None) -> None:
        """Record ``key`` (a page at ``url``) as done for later runs: its
        items were kept. Later runs skip it (for ``recrawl_after`` seconds)."""
        self.add_url(key, info)

    def expired(self, key: int) -> bool:
        """Whether ``key`` was kept by an earlier run whose ``recrawl_after``
        has passed (so this run fetches it again and compares its text)."""
        return False

    def forget(
        self,
        keys: Iterable[int] = (),
        prefix: str | None = None,
        key_of: Callable[[str], int] | None = None,
    ) -> list[str]:
        """Forget the kept pages of ``keys`` and those whose URL starts with
        ``prefix``, so that the next run fetches them again; their URLs."""
        raise StoreError(f"{type(self).__name__} keeps nothing for later runs to forget")

    def describe(self) -> str:
        """One line for the log at start: where the store is, the namespace,
        and how much earlier state it holds."""
        return ""

    def end_run(self) -> None:
        """The run closed (not killed): a store that resumes only after a
        crash (``JOBDIR``) need not feed its frontier to the next run."""

    @abstractmethod
    def url_count(self) -> int:
        """How many URL keys the namespace holds."""

    def kept_as(self, key: int) -> str | None:
        """The URL a page of ``key`` was kept as, where the store keeps it
        (SQLite); ``None`` otherwise. For tools (``scrapy dedup explain``)."""
        return None

    def namespace_exists(self) -> bool:
        """Whether the namespace holds anything (a tool asks, so that a typo
        is an error rather than an empty namespace). Stores that cannot tell
        say yes."""
        return True

    def inventory(self, top: int = 10) -> dict[str, Any]:
        """What the namespace holds, for ``scrapy dedup stats``: ``counts``
        (name -> number) and ``hosts`` (the ``top`` hosts of its kept URLs,
        as ``[host, pages]``, where the store knows them)."""
        return {"counts": {"URL keys": self.url_count()}, "hosts": []}

    @abstractmethod
    def get_content(self, digest: bytes) -> str | None:
        """The URL first kept with text ``digest``, ``None`` when unknown."""

    @abstractmethod
    def add_content(self, digest: bytes, url: str) -> str | None:
        """Record ``digest`` for ``url``: ``None`` when new, else the first URL."""

    def use_near(self, method: NearMethod) -> None:
        """Called before a crawl looks up near duplicates with ``method``:
        raises :class:`StoreError` when the store cannot serve it (its texts
        are indexed for another layout)."""

    @abstractmethod
    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        """``(URL, score)`` of the kept document ``fingerprint`` is nearest to,
        among its near duplicates; ``None`` when it has none."""

    @abstractmethod
    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        """Keep ``fingerprint`` as the document at ``url``."""

    def match_or_add_near(
        self, method: NearMethod, fingerprint: Any, url: str
    ) -> tuple[str, Any] | None:
        """:meth:`match_near`, and :meth:`add_near` when there is no match."""
        match = self.match_near(method, fingerprint)
        if match is None:
            self.add_near(method, fingerprint, url)
        return match

    @abstractmethod
    def claim(self, key: int, owner: int) -> int | None:
        """Record ``owner`` (a page) as filed under the canonical URL of
        ``key``: ``None`` when it is the first, else the first owner."""

    @abstractmethod
    def add_filed(self, key: int, data: bytes) -> bool:
        """Remember an (encoded) fingerprint of an item filed under the
        canonical URL ``key``; the first :data:`FILED_LIMIT` are kept (``True``)."""

    @abstractmethod
    def filed(self, key: int) -> list[bytes]:
        """The encoded fingerprints of items filed under the canonical URL ``key``."""

    # The frontier of a store that outlives the run (SQLite): requests
    # scheduled but not yet done, fed again to the next run after a crash.
    def add_pending(self, key: int, request: str) -> None:
        """Remember a scheduled request (serialized) until :meth:`done_pending`."""

    def done_pending(self, key: int) -> None:
        """The request of ``key`` was processed: its outputs are out."""

    # The evidence of learned URL rules (DEDUP_LEARN): one log per namespace,
    # in one order for every process, so that the workers of one Redis and the
    # later runs of one SQLite file replay the same pages and learn the same rules.

    #: Whether :meth:`exchange_evidence` keeps a log (else it gives the
    #: records back as they came, and a caller may apply them without it).
    keeps_evidence = False

    def exchange_evidence(self, records: list[str], start: int) -> tuple[list[str], int]:
        """Append ``records`` to the namespace's evidence log, and return the
        log's records from position ``start`` on (other processes' and earlier
        runs' among them, ``records`` included, in the log's order) with the
        position after them. A store that keeps no log (memory) returns
        ``records`` and ``start``: the process learns on its own."""
        return list(records), start

    #: Whether the next run is fed every unfinished request of the frontier,
    #: or only the failed ones (after a pause with ``JOBDIR``, Scrapy's own
    #: queue holds the others).
    resume_all = True

    def pending_requests(self) -> list[tuple[int, str]]:
        """``(key, request)`` of the requests earlier runs scheduled and never
        finished, for the frontier middleware to feed to this run."""
        return []

    def clear_pending(self) -> None:
        """Forget the frontier (the run finished)."""

    # Leases, for a store several workers crawl at once (Redis): a worker
    # holds a lease while it crawls; the frontier rows of a worker whose lease
    # ran out (killed, or stopped) are adopted by a live worker, at most once.
    #: Seconds between two calls of :meth:`keep_lease` and :meth:`adopt` by
    #: the frontier middleware; ``None``: the store keeps no leases.
    lease_interval: float | None = None
    #: This process's name among the workers of the store (the name
    #: :class:`Adoption` gives a worker); None for a store of one process.
    worker: str | None = None

    def keep_lease(self) -> None:
        """Take or renew this worker's lease (before its first frontier row)."""

    def release_lease(self) -> None:
        """Give the lease up: the worker stops, its rows are adopted at once."""

    def own_row(self, key: int) -> None:
        """This worker fetches the request of ``key``: its row is adopted from
        this worker if it dies (under a shared queue, such as scrapy-redis's,
        another worker may have scheduled it)."""

    def adopt(self) -> list[Adoption]:
        """Take over the workers of this run whose lease ran out (each by one
        caller only) and their frontier rows; each row is given to one caller only."""
        return []

    def readmit(self, key: int) -> None:
        """The next :meth:`add_url` of ``key`` answers ``None`` (once): an
        adopted request, seen by the worker that died but never done."""

    def readmit_link(self, key: int) -> None:
        """:meth:`readmit` ``key`` (a link of an adopted page) if it was seen
        in this run but is neither kept nor waiting in a frontier row: the
        worker that died may have seen it and died before writing its row."""

    def awaiting_adoption(self) -> bool:
        """Whether a worker of this run is gone while its lease still holds
        and it left rows: they can be adopted once the lease runs out."""
        return False

    #: While :meth:`hold` runs: the list a store that holds writes back puts
    #: them in (the token); ``None`` otherwise.
    _holding: list[Any] | None = None

    @contextlib.contextmanager
    def hold(self) -> Iterator[Any]:
        """Writes made inside wait for :meth:`release` of the token yielded
        (a list, empty for a store that holds nothing back)."""
        outer, self._holding = self._holding, []
        try:
            yield self._holding
        finally:
            self._holding = outer

    def release(self, token: Any) -> None:
        """Make the writes held under ``token`` durable."""

    def discard(self, token: Any) -> None:
        """Forget the writes held under ``token`` (they are not persisted)."""

    @abstractmethod
    def clear(self, urls_only: bool = False) -> None:
        """Forget the namespace's URL keys, or everything it holds."""

    def ping(self) -> None:
        """Raise :class:`StoreError` unless the store answers (may be called
        from another thread, while the store is down)."""

    def fallback(self) -> MemoryStore | None:
        """The memory store that answers while this store is down (``None``:
        an empty one). Called once, when :class:`~scrapy_dedup.stores.GuardedStore`
        wraps the store: a store that keeps keys in memory shares them (a view
        stays current, a copy would not), so a process does not refetch pages
        it already knew."""
        return None

    def flush(self) -> None:
        """Make what was recorded durable (where the store persists at all)."""

    def close(self) -> None:
        """Flush and release resources; the store is not used afterwards."""


def redact(uri: str) -> str:
    """``uri`` with its password replaced, for messages and logs: everything
    between ``://`` and the last ``@`` (a user name before a ``:`` stays),
    whatever a URI parser would make of a password that is not
    percent-encoded.

    >>> redact("redis://:s3cret@cache:6379/0")
    'redis://:***@cache:6379/0'
    >>> redact("redis://user:p@ss@cache/0?password=x&db=1")
    'redis://user:***@cache/0?password=***&db=1'
    >>> redact("redis://:p@ss:w/rd?x@host:6391/0")
    'redis://:***@host:6391/0'
    """
    scheme, sep, rest = uri.partition("://")
    if sep and "@" in rest:
        userinfo, _, host = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        shown = f"{user}:***" if colon and not set(user) & set("@/?#") else "***"
        uri = f"{scheme}://{shown}@{host}"
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", uri, flags=re.IGNORECASE)


def warn_old_fingerprints(where: str, count: int | None = None) -> None:
    """Say once per store that texts kept by an earlier version have
    near-duplicate fingerprints this version cannot compare."""
    logger.warning(
        "Dedup store %s holds %s near-duplicate texts kept by an earlier scrapy-dedup "
        "version, whose fingerprints this version cannot compare (its MinHash changed): "
        "near duplicates of them are kept, not dropped; exact duplicates are still found. "
        "To start the namespace over, run once with -s DEDUP_RESET=1.",
        where,
        "some" if count is None else count,
    )


def warn_old_texts(where: str, version: int, current: int) -> None:
    """Say once per store that its exact-text digests were made by an earlier
    text normalization (``version``; this one is ``current``)."""
    logger.warning(
        "Dedup store %s holds texts recorded with an earlier text normalization "
        "(version %d, now %d: Unicode forms, entities, zero-width characters): an item "
        "whose text the new one spells otherwise is kept once more, as new; none is "
        "lost. To start the namespace over, run once with -s DEDUP_RESET=1.",
        where,
        version,
        current,
    )
