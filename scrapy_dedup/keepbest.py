"""``DEDUP_KEEP = "best"``: hold an item from a worse copy of a page while the
plainer copy is on its way, so that the copy kept is the page's own.

A page that declares another URL its canonical (a print view, an AMP page, an
alias) has its items filed under that URL; whichever copy arrives first is
kept. With ``"best"``, such an item is held (not emitted, not recorded as
kept: a kill -9 meanwhile loses nothing, the page is fetched again by the
next run) while the declared page was scheduled in this run and its items
have not come yet. It is released, and goes through the pipeline again:

- when an item from the declared page went through (``arrived``): the held
  item is then compared with what was filed there, and dropped as its
  ``canonical`` duplicate when it has that text, kept under its own URL when
  it has another;
- when the declared page answered with an error status (``failed``);
- after ``DEDUP_KEEP_WAIT`` seconds (``timeout``): a download error, a
  redirect, a page that gives no item. A held item keeps its response's
  scraper slot busy, and Scrapy does not close a spider that is busy: the
  time limit is what ends every hold.

At most ``DEDUP_KEEP_MAX_HELD`` items are held at once; beyond, items are
kept as they come (``dedup/keep/full``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from scrapy_dedup.keys import PREVIOUS_RUN, REL_CANONICAL
from scrapy_dedup.url.plain import plainer

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scrapy_dedup.state import CrawlState
    from scrapy_dedup.stores import DedupStore

__all__ = ["KEEP_MODES", "KeepBest"]

logger = logging.getLogger(__name__)

#: ``DEDUP_KEEP``: the first copy to arrive, or the plainest one expected.
KEEP_MODES = ("first", "best")
#: Pages whose answer is remembered (to hold for one that answered but whose
#: items have not come yet; not for one that came and went).
_RECENT = 10_000


class KeepBest:
    """Decides which items to hold and when to release them. One per pipeline."""

    def __init__(self, crawler: Crawler, state: CrawlState) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.keys = state.keys
        self.wait = state.config.keep_wait
        self.max_held = state.config.keep_max_held
        self.debug = state.config.debug
        self.store: DedupStore | None = None
        #: key of a declared page -> the held items' waiters.
        self._waiting: dict[int, list[Deferred[str]]] = {}
        self._held = 0
        #: key of a page that answered -> whether its items are still to come.
        self._answered: OrderedDict[int, bool] = OrderedDict()
        crawler.signals.connect(self._response_received, signal=signals.response_received)

    def expects(self, target: str, fetched: str) -> int | None:
        """The key of ``target`` when an item from ``fetched``, a page that
        declares ``target`` its canonical URL, is to wait for that page's own
        items: ``target`` is plainer, was scheduled in this run (not skipped
        on trust, not kept by an earlier run) and its items have not come.
        ``None``: keep the item as it comes."""
        if self.store is None or not plainer(target, fetched, canonical=target):
            return None
        key = self.keys.of_url(target)
        to_come = self._answered.get(key)
        if to_come is False:
            return None
        if to_come is None:
            info = self.store.get_url(key)
            if info is None or info & (REL_CANONICAL | PREVIOUS_RUN):
                return None
        if self._held >= self.max_held:
            self.stats.inc_value("dedup/keep/full")
            return None
        return key

    def awaits(self, url: str) -> bool:
        """Whether items are held for the page at ``url``."""
        return bool(self._waiting) and self.keys.of_url(url) in self._waiting

    async def hold(self, key: int, url: str) -> str:
        """Wait until the page of ``key`` gave an item, failed, or
        ``DEDUP_KEEP_WAIT`` passed; why (``arrived``, ``failed``, ``timeout``)."""
        waiter: Deferred[str] = Deferred()
        self._waiting.setdefault(key, []).append(waiter)
        self._held += 1
        self.stats.inc_value("dedup/keep/held")
        if self.debug:
            logger.info("Holding the item from %s: its canonical page is on its way", url)
        timer = call_later(self.wait, self._timeout, key, waiter)
        try:
            why = await maybe_deferred_to_future(waiter)
        finally:
            self._held -= 1
            timer.cancel()
        self.stats.inc_value(f"dedup/keep/released/{why}")
        return why

    def arrived(self, url: str) -> None:
        """An item from the page at ``url`` went through the pipeline: the
        items held for it go on (on the next reactor turn, once this one is
        recorded)."""
        if not self._waiting or not url:
            return
        key = self.keys.of_url(url)
        self._remember(key, False)
        if key in self._waiting:
            call_later(0, self._release, key, "arrived")

    def _response_received(self, response: Response, request: Request) -> None:
        if request.method != "GET":
            return
        key = self.keys.of_url(response.url)
        ok = 200 <= response.status < 300
        self._remember(key, ok)
        if not ok:
            self._release(key, "failed")

    def _remember(self, key: int, to_come: bool) -> None:
        self._answered[key] = to_come
        self._answered.move_to_end(key)
        if len(self._answered) > _RECENT:
            self._answered.popitem(last=False)

    def _release(self, key: int, why: str) -> None:
        for waiter in self._waiting.pop(key, ()):
            waiter.callback(why)

    def _timeout(self, key: int, waiter: Deferred[str]) -> None:
        waiters = self._waiting.get(key)
        if waiters is None or waiter not in waiters:
            return
        waiters.remove(waiter)
        if not waiters:
            del self._waiting[key]
        waiter.callback("timeout")
