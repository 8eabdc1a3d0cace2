"""FeedCheckpoints: a page counts as kept for later runs only once what it
produced is on disk in every feed of Scrapy's own feed exports (``FEEDS``,
``-o``, ``-O``).

Scrapy's feed exporter writes items to a buffered file at ``item_scraped``:
after a ``kill -9`` the last few kilobytes never reach the file, while the
store has already recorded their pages. So the records of a page that gave
items (the page kept, its row taken off the frontier, its texts kept) are
*held* here, and made at a checkpoint, every ``DEDUP_FEED_CHECKPOINT``
seconds and at the end: every open local feed file is flushed and fsynced
first. Feeds stored only when they close (S3,
GCS, FTP, stdout, compressed with ``postprocessing``) keep the records until
the file that holds their items is stored: for one feed per run, until the
run ends; with ``FEED_EXPORT_BATCH_ITEM_COUNT``, until the batch is stored.
A ``kill -9`` then makes the next run fetch those pages again: nothing is lost.

The feed exporter's slots are Scrapy internals: when they do not look as
expected, every record waits for the end of the feeds (``feed_exporter_closed``),
which is always safe, and an INFO line says why. A feed that failed to store
(``feedexport/failed_count/...``) or a file that failed to sync stops all
records of the run: the next run fetches those pages again.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar
from weakref import WeakKeyDictionary

from pydispatch.dispatcher import getAllReceivers, liveReceivers
from scrapy import signals
from scrapy.extensions.feedexport import FeedExporter, FileFeedStorage
from scrapy.utils.asyncio import call_later, create_looping_call

from scrapy_dedup.state import CrawlState

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = ["DurableFileFeedStorage", "FeedCheckpoints"]

logger = logging.getLogger(__name__)

Record = Callable[[], None]


@dataclass
class _Slot:
    """One feed file (a slot of Scrapy's FeedExporter) as far as records care."""

    slot: Any  # held, so its id() is not reused
    local: bool  # a plain local file: flushed and fsynced at checkpoints
    path: str | None
    closed: bool = False  # stored (feed_slot_closed)
    final: bool = False  # nothing more to do: synced after closing, or stored
    dir_synced: bool = False


@dataclass
class _Batch:
    records: list[Record]
    waits: list[_Slot] = field(default_factory=list)


class FeedCheckpoints:
    """Holds records until the feeds hold what they follow; one per crawler
    (:meth:`of`). Without feeds, a record is made at once."""

    _all: ClassVar[WeakKeyDictionary[Crawler, FeedCheckpoints]] = WeakKeyDictionary()

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        settings = crawler.settings
        config = CrawlState.of(crawler).config
        outlives_run = config.store.strip().lower() != "memory" or bool(settings.get("JOBDIR"))
        #: Whether records wait: Scrapy exports feeds, and the store outlives the run.
        self.active = outlives_run and bool(settings.getdict("FEEDS") or settings.get("FEED_URI"))
        self._exporter: FeedExporter | None = None
        self._why_not: str | None = None  # set: everything waits for the end
        self._failed = False  # a feed failed: nothing more is recorded
        self._done = False  # the feeds are closed: records are made at once
        self._slots: dict[int, _Slot] = {}
        self._new: list[Record] = []  # since the last checkpoint
        self._older: list[Record] = []  # since the one before
        self._waiting: list[_Batch] = []
        self._loop: Any = None
        self._soon = False  # a checkpoint is due on the next reactor turn
        self._opened = False
        self._phases = 1  # checkpoints a record waits for (see _spider_opened)
        #: Checkpoints so far: an item scraped in period p is synced by the
        #: checkpoint that ends it (the next one, with two phases).
        self.period = 0
        self._durable = 0  # items scraped in periods before this are durable
        connect = crawler.signals.connect
        connect(self._spider_opened, signal=signals.spider_opened)
        connect(self._item_scraped, signal=signals.item_scraped)
        connect(self._slot_closed, signal=signals.feed_slot_closed)
        connect(self._feeds_closed, signal=signals.feed_exporter_closed)
        connect(self._engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def of(cls, crawler: Crawler) -> FeedCheckpoints:
        """The crawl's checkpoints, created on first use."""
        found = cls._all.get(crawler)
        if found is None:
            found = cls._all[crawler] = cls(crawler)
        return found

    # -- what components call ----------------------------------------------

    def after_feeds(self, record: Record, *, exported: int | None = None) -> bool:
        """Call ``record`` once every item scraped so far is durable in
        every feed (at once without feeds), or, with ``exported``, every item
        scraped up to that :attr:`period` (at once if a checkpoint since did).
        Returns whether it was called at once."""
        if not self._opened:
            self._spider_opened()
        if not self.active or self._done or (exported is not None and exported < self._durable):
            record()
            return True
        if self._failed:
            self.stats.inc_value("dedup/feeds/unrecorded")
        else:
            self._new.append(record)
            self.stats.inc_value("dedup/feeds/held")
        return False

    # -- finding the feeds ---------------------------------------------------

    def _spider_opened(self) -> None:
        if self._opened:
            return
        self._opened = True
        if not self.active:
            return
        extensions = getattr(getattr(self.crawler, "extensions", None), "middlewares", ())
        exporters = [e for e in extensions if isinstance(e, FeedExporter)]
        if not exporters:  # FEEDS set, but the exporter is disabled: no feed
            self.active = False
            self._release(self._older + self._new)
            return
        self._exporter = exporters[0]
        if not isinstance(getattr(self._exporter, "slots", None), list):
            self._give_up("Scrapy's FeedExporter has no list of slots")
        receivers = list(
            liveReceivers(getAllReceivers(self.crawler.signals.sender, signals.item_scraped))
        )
        exports, ours = self._exporter.item_scraped, self._item_scraped
        if not (exports in receivers and ours in receivers) or (
            receivers.index(exports) > receivers.index(ours)
        ):
            # An item's record may come before the exporter writes it: make a
            # record wait one more checkpoint, so the item is written by then.
            self._phases = 2
        self._loop = create_looping_call(self.checkpoint)
        self._loop.start(CrawlState.of(self.crawler).config.feed_checkpoint, now=False)

    def _give_up(self, why: str) -> None:
        if self._why_not is None:
            self._why_not = why
            logger.info(
                "Pages are recorded for later runs only once the feeds are stored at "
                "the end of the crawl (%s): after a kill -9 the next run fetches this "
                "run's pages again",
                why,
            )

    def _scan(self) -> None:
        """Learn the exporter's current slots: every slot that receives items
        is in its list at some item_scraped (it is made empty, when the one
        before is full)."""
        if self._exporter is None or self._why_not is not None:
            return
        for slot in self._exporter.slots:
            if id(slot) in self._slots:
                continue
            storage = getattr(slot, "storage", None)
            options = getattr(slot, "feed_options", None)
            if storage is None or not hasattr(slot, "file") or not isinstance(options, dict):
                self._give_up(f"a feed slot of an unknown kind: {type(slot).__name__}")
                return
            local = isinstance(storage, FileFeedStorage) and "postprocessing" not in options
            path = getattr(storage, "path", None) if local else None
            self._slots[id(slot)] = _Slot(slot, local=local and isinstance(path, str), path=path)

    def _item_scraped(self) -> None:
        if self._exporter is not None:
            self._scan()

    # -- checkpoints -----------------------------------------------------------

    def checkpoint(self) -> None:
        """Flush and fsync the open local feed files, then make the records
        that waited a whole period (or wait for the slots that store later)."""
        if self._exporter is None or self._done or self._failed:
            return
        self._scan()
        if self._why_not is not None:
            return  # everything waits for the end of the feeds
        if self._phases == 1:
            due, self._new = self._older + self._new, []
            self._older = []
        else:
            due, self._older, self._new = self._older, self._new, []
        current = {id(slot) for slot in self._exporter.slots}
        waits = []
        for entry in self._slots.values():
            if entry.final:
                continue
            if entry.local and id(entry.slot) in current:
                if not self._sync_open(entry):
                    return
            elif entry.local and entry.closed:
                if not self._sync_closed(entry):
                    return
            else:  # being stored, or stored only when it closes
                waits.append(entry)
        self.stats.inc_value("dedup/feeds/checkpoints")
        # Slots closed and synced are done with (a batch file each).
        waited = {id(entry) for batch in self._waiting for entry in batch.waits}
        for key in [k for k, e in self._slots.items() if e.final and id(e) not in waited]:
            if key not in current:
                del self._slots[key]
        self.period += 1
        if not waits and not self._waiting:
            self._durable = self.period + 1 - self._phases
        if due:
            self._waiting.append(_Batch(due, waits))
        self._release_ready()

    def _sync_open(self, entry: _Slot) -> bool:
        file = entry.slot.file
        if file is None:  # no item yet: nothing to sync
            return True
        try:
            file.flush()
            os.fsync(file.fileno())
            self._sync_dir(entry)
        except (OSError, ValueError, AttributeError) as exc:
            self._fail(f"cannot sync the feed {entry.path}: {exc}")
            return False
        return True

    def _sync_closed(self, entry: _Slot) -> bool:
        assert entry.path is not None
        try:
            fd = os.open(entry.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._sync_dir(entry)
        except OSError as exc:
            self._fail(f"cannot sync the feed {entry.path}: {exc}")
            return False
        entry.final = True
        return True

    @staticmethod
    def _sync_dir(entry: _Slot) -> None:
        """A new file's name must be on disk too (once per file)."""
        if entry.dir_synced or entry.path is None:
            return
        fd = os.open(os.path.dirname(os.path.abspath(entry.path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        except OSError:
            pass  # some file systems cannot sync a directory
        finally:
            os.close(fd)
        entry.dir_synced = True

    def _release_ready(self) -> None:
        waiting, self._waiting = self._waiting, []
        for batch in waiting:
            if all(entry.final for entry in batch.waits):
                self._release(batch.records)
            else:
                self._waiting.append(batch)

    def _release(self, records: list[Record]) -> None:
        for record in records:
            record()
        if records:
            # Committed now, right after the sync: the shorter the time between
            # the feed's bytes on disk and the pages recorded, the fewer items
            # a kill -9 in between makes the next run write again.
            CrawlState.of(self.crawler).flush()

    def file_storing(self, file: Any) -> None:
        """A local feed file is stored (closed), from
        :meth:`DurableFileFeedStorage.store`: its last bytes are synced, and
        the pages whose items it holds recorded, in this same call."""
        entry = next((e for e in self._slots.values() if e.slot.file is file), None)
        try:
            if entry is not None and not self._failed and self._sync_open(entry):
                entry.closed = entry.final = True
                self._checkpoint_soon()
        finally:
            file.close()

    def _checkpoint_soon(self) -> None:
        """A checkpoint on the next reactor turn, for a batch file just stored.
        Not now: Scrapy may store a full batch inside the ``item_scraped`` of
        its last item (with a reactor other than asyncio's, closing the slot
        runs at once), before the frontier notes that item's period; a
        checkpoint then would leave its page for the next one, a period during
        which a kill -9 writes the item again."""
        if not self._soon:
            self._soon = True
            call_later(0, self._scheduled_checkpoint)

    def _scheduled_checkpoint(self) -> None:
        self._soon = False
        self.checkpoint()

    def _fail(self, why: str) -> None:
        if not self._failed:
            self._failed = True
            unrecorded = len(self._new) + len(self._older)
            unrecorded += sum(len(batch.records) for batch in self._waiting)
            self.stats.inc_value("dedup/feeds/unrecorded", unrecorded)
            logger.warning(
                "%s: the pages of the items not on disk yet are not recorded, "
                "the next run fetches them again",
                why,
            )
        self._new, self._older, self._waiting = [], [], []

    def _storing_failed(self) -> bool:
        stats = self.stats.get_stats()
        return any(k.startswith("feedexport/failed_count/") and v for k, v in stats.items())

    # -- feeds stored ------------------------------------------------------------

    def _slot_closed(self, slot: Any) -> None:
        if self._exporter is None or self._failed:
            return
        if self._storing_failed():
            self._fail("a feed failed to store")
            return
        entry = self._slots.get(id(slot))
        if entry is None or entry.final:
            return  # it held no item we wait for, or was synced as it closed
        entry.closed = True
        if not entry.local:
            file = getattr(slot, "file", None)
            if file is not None and not getattr(file, "closed", True):
                with contextlib.suppress(OSError, ValueError):
                    file.flush()  # stdout
            entry.final = True
            self._release_ready()
        elif self._sync_closed(entry):
            # A full batch reached its file: record its pages now, not at the
            # next checkpoint (a kill -9 meanwhile would write them twice).
            self._checkpoint_soon()

    def _feeds_closed(self) -> None:
        """Every feed is stored: the last checkpoint."""
        if self._exporter is None or self._done:
            return
        if self._storing_failed():
            self._fail("a feed failed to store")
        if not self._failed:
            for entry in self._slots.values():
                opened = getattr(entry.slot, "file", None) is not None
                if not entry.final and entry.local and opened and not self._sync_closed(entry):
                    break
                entry.final = True
        if not self._failed:
            records = [r for batch in self._waiting for r in batch.records]
            self._waiting = []
            self._release(records + self._older + self._new)
            self._older, self._new = [], []
        self._done = True
        self._stop()

    def _engine_stopped(self) -> None:
        self._stop()
        self._all.pop(self.crawler, None)

    def _stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()


class _HeldFile(io.BufferedIOBase):
    """A feed file whose bytes reach the OS only when flushed (at checkpoints
    and on close), not whenever a buffer fills: after a kill -9 the file
    holds exactly the items of the checkpoints, in whole lines."""

    #: Bytes held in memory before they are written anyway (a huge burst).
    limit = 64 * 1024 * 1024

    def __init__(self, file: Any) -> None:
        super().__init__()
        self._file = file
        self._held = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("write to a closed feed file")
        self._held += data
        if len(self._held) > self.limit:
            self.flush()
        return len(data)

    def flush(self) -> None:
        if self._held:
            self._file.write(self._held)
            self._held.clear()
        if not self._file.closed:
            self._file.flush()

    def fileno(self) -> int:
        return int(self._file.fileno())

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.flush()
        finally:
            self._file.close()
            super().close()


class DurableFileFeedStorage(FileFeedStorage):
    """Scrapy's local file feed storage (``-o``, ``FEEDS`` with a path or
    ``file://``), whose bytes reach the file at the checkpoints of
    :class:`FeedCheckpoints` only: a kill -9 then leaves no half line, and
    items whose pages are not recorded (fetched again and written twice) only
    when it comes between a checkpoint's write and the commit right after.
    :class:`~scrapy_dedup.DedupAddon` installs it in ``FEED_STORAGES``."""

    crawler: Crawler | None = None

    @classmethod
    def from_crawler(
        cls, crawler: Crawler, uri: str, *, feed_options: dict[str, Any] | None = None
    ) -> Self:
        storage = cls(uri, feed_options=feed_options)
        storage.crawler = crawler
        return storage

    def open(self, spider: Any) -> Any:
        checkpoints = FeedCheckpoints._all.get(self.crawler) if self.crawler else None
        if checkpoints is None or not checkpoints.active:
            return super().open(spider)  # nobody would write it out before the end
        return _HeldFile(super().open(spider))

    def store(self, file: Any) -> None:
        checkpoints = FeedCheckpoints._all.get(self.crawler) if self.crawler else None
        if checkpoints is None:
            file.close()
        else:
            checkpoints.file_storing(file)
