"""DedupFrontierMiddleware: what makes an SQLite store safe against ``kill -9``.

With ``DEDUP_STORE = "sqlite:///..."``, a later run skips pages that gave
items. A page must therefore be recorded only once everything it led to is
safe: every request it yielded is scheduled (and so in the store's frontier
of unfinished requests) and every item it yielded is out of the pipelines.
This spider middleware counts a response's outputs until each one has been
scheduled, filtered or dropped, then records the page and takes it off the
frontier. A run that starts after a crash first feeds the unfinished
requests of the earlier run back in, so nothing the earlier run had found is
lost.

Requests are kept as JSON (``Request.to_dict``): callbacks by name, meta and
``cb_kwargs`` values that JSON can hold; a request is kept without the values
that JSON cannot hold (``dedup/frontier/simplified``), and not at all when
its callback is not a spider method (``dedup/frontier/unsaved``). Nothing is
unpickled or imported from the file.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import call_later
from scrapy.utils.request import request_from_dict

from scrapy_dedup._crawler_store import acquire_store, release_store
from scrapy_dedup.dupefilter import (
    build_canonicalizer,
    custom_fingerprinter,
    hop_key,
    keep_page,
    request_key,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["DedupFrontierMiddleware", "request_from_json", "request_to_json"]

logger = logging.getLogger(__name__)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(type(value).__name__)


def _unjson(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return base64.b64decode(value["__bytes__"])
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    return value


def request_to_json(request: Request, spider: Any) -> tuple[str | None, bool]:
    """``(JSON, simplified)``: the request as ``Request.to_dict`` gives it,
    without its class (always rebuilt as a plain ``Request``); meta and
    ``cb_kwargs`` entries JSON cannot hold are left out (``simplified``).
    ``None`` for a request whose callback is not a spider method: it could
    only come back with the wrong callback."""
    try:
        data = request.to_dict(spider=spider)
    except ValueError:
        return None, True
    simplified = False
    data.pop("_class", None)
    data["headers"] = {
        key.decode("latin-1"): [value.decode("latin-1") for value in values]
        for key, values in (data.get("headers") or {}).items()
    }
    for name in ("meta", "cb_kwargs"):
        kept = {}
        for key, value in (data.get(name) or {}).items():
            try:
                kept[key] = _jsonable(value)
            except TypeError:
                simplified = True
        data[name] = kept
    for name, value in list(data.items()):
        if name not in ("meta", "cb_kwargs"):
            try:
                data[name] = _jsonable(value)
            except TypeError:
                data.pop(name)
                simplified = True
    return json.dumps(data, separators=(",", ":")), simplified


def request_from_json(text: str, spider: Any) -> Request | None:
    """The request :func:`request_to_json` wrote; ``None`` when it cannot be
    rebuilt (a callback the spider no longer has)."""
    try:
        data = _unjson(json.loads(text))
        data.pop("_class", None)
        return request_from_dict(data, spider=spider)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


@dataclass
class _Page:
    key: int
    response: Any  # held, so its id() is not reused while the page is tracked
    outstanding: int = 0  # outputs not yet scheduled, filtered or out of the pipelines
    kept: int = 0  # items scraped, or dropped as duplicates of a kept text
    finished: bool = False
    settling: bool = False


class DedupFrontierMiddleware:
    """Spider middleware (order 10, outermost: it sees what the engine gets)
    that records a page for later runs only once its outputs are safe, and
    feeds an interrupted run's unfinished requests to the next one. Only
    active with a store that persists kept pages (SQLite)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.store = acquire_store(crawler)
        if not self.store.persists_kept:
            release_store(crawler)
            raise NotConfigured("only stores that persist kept pages need a frontier (SQLite)")
        self.stats = crawler.stats
        self.canonicalizer = build_canonicalizer(crawler.settings)
        self.fingerprinter = custom_fingerprinter(crawler)
        self._pages: dict[int, _Page] = {}  # id(response) -> its page
        self._requests: dict[int, tuple[Request, _Page]] = {}  # id(request) -> its page
        self.store.tracks_pages = True  # the dupefilter leaves recording to us
        connect = crawler.signals.connect
        connect(self._request_out, signal=signals.request_scheduled)
        connect(self._request_out, signal=signals.request_dropped)
        connect(self._item_scraped, signal=signals.item_scraped)
        connect(self._item_dropped, signal=signals.item_dropped)
        connect(self._item_error, signal=signals.item_error)
        connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        pending = self.store.pending_requests()
        if pending:
            restored = 0
            for text in pending:
                request = request_from_json(text, self.crawler.spider)
                if request is not None:
                    restored += 1
                    # Through the filter: a request the crawl meets again is fetched once.
                    yield request.replace(dont_filter=False)
            self.stats.inc_value("dedup/frontier/restored", restored)
            logger.info(
                "Resuming %d requests an earlier run of this namespace left unfinished",
                restored,
            )
        async for item_or_request in start:
            yield item_or_request

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        page = self._pages.get(id(response))
        if page is None:
            assert response.request is not None
            key, _, _ = request_key(response.request, self.canonicalizer, self.fingerprinter)
            page = self._pages[id(response)] = _Page(key, response=response)
        try:
            async for output in result:
                page.outstanding += 1
                if isinstance(output, Request):
                    self._requests[id(output)] = (output, page)
                yield output
        except BaseException:
            # A failed callback: the page stays in the frontier, fetched again next run.
            self._pages.pop(id(response), None)
            raise
        page.finished = True
        self._maybe_settle(page)

    def _request_out(self, request: Request) -> None:
        entry = self._requests.pop(id(request), None)
        if entry is not None:
            entry[1].outstanding -= 1
            self._maybe_settle(entry[1])

    def _item_scraped(self, item: Any, response: Response | None) -> None:
        self._item_out(response, kept=True)

    def _item_dropped(self, item: Any, response: Response | None, exception: Any) -> None:
        # A duplicate's text is kept under another URL: that counts as kept.
        self._item_out(response, kept=getattr(exception, "dedup_duplicate", False))

    def _item_error(self, item: Any, response: Response | None) -> None:
        self._item_out(response, kept=False)

    def _item_out(self, response: Response | None, *, kept: bool) -> None:
        # Items are matched by their response: a pipeline may return another object.
        page = self._pages.get(id(response)) if response is not None else None
        if page is not None:
            page.outstanding -= 1
            page.kept += kept
            self._maybe_settle(page)

    def _maybe_settle(self, page: _Page) -> None:
        if page.finished and page.outstanding <= 0 and not page.settling:
            page.settling = True
            # Not now: Scrapy sends request_scheduled before the scheduler asks
            # the filter (which writes the request's pending row), and the
            # pipeline releases an item's text after this handler. On the next
            # tick both are written, so the page's record comes after them.
            call_later(0, self._settle, page)

    def _settle(self, page: _Page) -> None:
        response = page.response
        if self._pages.get(id(response)) is not page:
            return
        del self._pages[id(response)]
        request = response.request
        persist = request.meta.get("dedup_persist")
        if persist is not False and (page.kept or persist is True):
            keep_page(self.store, request, self.canonicalizer, self.fingerprinter)
        self.store.done_pending(page.key)
        for url in request.meta.get("redirect_urls", ()):
            hop = hop_key(request, url, self.canonicalizer, self.fingerprinter)
            if hop is not None:
                self.store.done_pending(hop)

    def _spider_closed(self, reason: str) -> None:
        # Pages about to settle settle now; pages whose outputs never all came
        # out (a request dropped by a spider middleware below this one) stay in
        # the frontier.
        for page in [p for p in self._pages.values() if p.settling]:
            self._settle(page)
        self._pages.clear()
        self._requests.clear()
        if reason == "finished":
            # Every request was processed: the frontier holds only those whose
            # outputs were dropped on the way (download errors, offsite...).
            self.store.clear_pending()
        release_store(self.crawler)
