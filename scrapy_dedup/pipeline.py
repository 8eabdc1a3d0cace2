"""ContentDedupPipeline: drop (or mark) items whose text was already kept."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import DropItem, NotConfigured

from scrapy_dedup.config import dedup_enabled
from scrapy_dedup.durable import FeedCheckpoints
from scrapy_dedup.keepbest import KeepBest
from scrapy_dedup.state import CrawlState
from scrapy_dedup.text import MinHashMethod, NearMethod, content_digest, extract_text, make_method
from scrapy_dedup.text.minhash import jaccard_estimate
from scrapy_dedup.text.minhash import signature as signature_of
from scrapy_dedup.text.shingles import NormalizedText, has_more_tokens
from scrapy_dedup.text.template import TemplateModel
from scrapy_dedup.url.plain import marked_more, plainer

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from scrapy_dedup.state import CanonicalMap
    from scrapy_dedup.stores import DedupStore

__all__ = ["ContentDedupPipeline", "DuplicateItem"]

logger = logging.getLogger(__name__)

#: Items checked for DEDUP_TEXT_FIELD: a warning when more than half lack it.
_TEXT_FIELD_SAMPLE = 20


class DuplicateItem(DropItem):
    """The ``DropItem`` this pipeline raises for a duplicate (its text is kept
    under another URL)."""

    dedup_duplicate = True


class ContentDedupPipeline:
    """Drops items whose extracted text is identical, or nearly so, to an item
    already kept, whatever URL they came from.

    Exact duplicates: SHA-256 of the lowercased, whitespace-collapsed text.
    Near duplicates: by default MinHash over 3-word shingles, an estimated
    Jaccard similarity of at least ``DEDUP_NEAR_THRESHOLD``; or the recipe's
    SimHash radius (``DEDUP_NEAR_METHOD = "simhash"``).
    """

    def __init__(self, crawler: Crawler) -> None:
        if not dedup_enabled(crawler.settings):
            raise NotConfigured("DEDUP_ENABLED is False")
        self.state = CrawlState.of(crawler)
        config = self.state.config
        if not config.content_enabled:
            raise NotConfigured("DEDUP_CONTENT_ENABLED is False")
        self.crawler = crawler
        self.text_fields = list(config.text_fields)
        self.url_field = config.url_field
        self.fetched_url_field = config.fetched_url_field
        # DEDUP_ITEM_URL = "clean": items get their page's clean URL.
        self._cleaner = (
            config.canonicalizer(dropping_only=True) if config.item_url == "clean" else None
        )
        self.on_duplicate = config.on_duplicate
        self.near: NearMethod | None = make_method(
            config.near_method,
            threshold=config.near_threshold,
            max_distance=config.simhash_max_distance,
        )
        if self.near is not None:
            # A Redis namespace indexed for another threshold refuses here, at start.
            self.state.use_near(self.near)
        self.max_chars = config.max_text_chars
        # DEDUP_RECRAWL_AFTER: pages fetched again once their time passed.
        self.recrawls = config.recrawl_after is not None
        self.min_words = config.near_min_words
        # DEDUP_NEAR_TEMPLATE: each host's template learned from every text
        # compared (per process), and a near duplicate must share the rest too.
        self.templates = (
            TemplateModel()
            if config.near_template and isinstance(self.near, MinHashMethod)
            else None
        )
        self.debug = config.debug
        self.stats = crawler.stats
        self._logged_first = False
        self._warned_mark = False
        # [items checked, items without any text field] until the first
        # _TEXT_FIELD_SAMPLE items are checked; then None.
        self._lacking: list[int] | None = [0, 0]
        self._fields_seen: set[str] = set()
        self.canonical_similarity = config.canonical_min_similarity
        self._filing_method = MinHashMethod(threshold=max(self.canonical_similarity, 0.01))
        # The default near method computes the very same signature: reuse it then.
        self._filing_compatible = (
            self.near
            if isinstance(self.near, MinHashMethod)
            and self.near.num_perm == self._filing_method.num_perm
            else None
        )
        self.state.summary.uses(
            f"content dedup (exact{f' + near {config.near_method}' if self.near else ''})"
        )
        self.store: DedupStore | None = None
        self.canonicals: CanonicalMap | None = None
        self._warned_fetched = False
        self._last_shingles: tuple[NormalizedText, Any] | None = None
        self._warned_clean = False
        # Writes of kept items wait until the item is out of every pipeline,
        # so a store that outlives the run never records an item that was lost.
        self._held: dict[int, tuple[Any, Any]] = {}
        self.feeds = FeedCheckpoints.of(crawler)
        self.report = self.state.summary.report  # DEDUP_REPORT: duplicate clusters
        # DEDUP_KEEP = "best": items from a worse copy wait for the plainer one.
        self.keeper = KeepBest(crawler, self.state) if config.keep == "best" else None
        self._kept_why = (
            "first to arrive"
            if self.keeper is None
            else "first to arrive: the plainer copy was not expected, or came too late"
        )
        crawler.signals.connect(self._item_done, signal=signals.item_scraped)
        crawler.signals.connect(self._item_lost, signal=signals.item_dropped)
        crawler.signals.connect(self._item_lost, signal=signals.item_error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def open_spider(self) -> None:
        self.store = self.state.store
        self.canonicals = self.state.canonicals
        if self.keeper is not None:
            self.keeper.store = self.store
        self.state.attach()

    def close_spider(self) -> None:
        self._warn_text_fields()  # a crawl of fewer items than the sample
        if self._held:
            # A later pipeline returned another object than it was given: the
            # item came out, but its text is not recorded for later runs.
            self.stats.inc_value("dedup/items/unrecorded", len(self._held))
            self._held.clear()
        if self.store is not None:
            self.store = None
            self.state.detach()

    async def process_item(self, item: Any) -> Any:
        if self.store is None:  # used without open_spider (e.g. called directly)
            self.open_spider()
        result = self._run(item, hold=self.keeper is not None)
        if isinstance(result, _Hold):
            assert self.keeper is not None
            why = await self.keeper.hold(result.key, result.url)
            # Compared now with what the declared page filed, if its items came.
            result = self._run(item, settled=why == "arrived")
        return result

    def _run(self, item: Any, *, hold: bool = False, settled: bool = False) -> Any:
        """Process ``item``, its store writes held until it is out of every pipeline."""
        assert self.store is not None
        with self.store.hold() as held:
            try:
                result = self._process(item, hold=hold, settled=settled)
            except DropItem:
                self.store.discard(held)
                raise
        if held:
            # The item itself is kept too: its id must not be reused meanwhile.
            self._held[id(item)] = (item, held)
        return result

    def _item_done(self, item: Any) -> None:
        entry = self._held.pop(id(item), None)
        if entry is not None and self.store is not None:
            store, token = self.store, entry[1]
            if store.persistent:
                # Kept for later runs once the item is on disk in the feeds too.
                self.feeds.after_feeds(lambda: store.release(token))
            else:
                store.release(token)

    def _item_lost(self, item: Any) -> None:
        entry = self._held.pop(id(item), None)
        if entry is not None and self.store is not None:
            self.store.discard(entry[1])

    def _process(self, item: Any, *, hold: bool = False, settled: bool = False) -> Any:
        assert self.store is not None
        # A plain dict is its own adapter (ItemAdapter's costs more than the lookups).
        adapter: MutableMapping[str, Any] = item if type(item) is dict else ItemAdapter(item)
        fetched = _as_url(adapter.get(self.url_field))
        text = extract_text(adapter, self.text_fields)
        # (A held item's second pass is not counted again.)
        if self._lacking is not None and (hold or self.keeper is None):
            self._check_text_fields(adapter)
        if self.keeper is None:
            return self._process_text(item, adapter, fetched, text, settled=settled)
        if hold and text is not None:
            key = self._worth_holding(fetched)
            if key is not None:
                return _Hold(key, fetched)
        try:
            return self._process_text(item, adapter, fetched, text, settled=settled)
        finally:
            self.keeper.arrived(fetched)

    def _worth_holding(self, fetched: str) -> int | None:
        """DEDUP_KEEP = "best": the key of the plainer page to wait for when
        the item from ``fetched`` is the first filed under the canonical URL
        its page declares, and that page is on its way."""
        assert self.keeper is not None and self.canonicals is not None
        filed = self.canonicals.get(fetched) if fetched else None
        if filed is None or filed[1] or filed[0] == fetched:
            return None
        return self.keeper.expects(filed[0], fetched)

    def _process_text(
        self,
        item: Any,
        adapter: MutableMapping[str, Any],
        fetched: str,
        text: str | None,
        *,
        settled: bool = False,
    ) -> Any:
        # Normalized once, for the digest and the shingles alike.
        normalized = None if text is None else NormalizedText(text)
        url, filed, signature = self._place(adapter, fetched, normalized, settled=settled)
        if normalized is None:
            self.stats.inc_value("dedup/items/no_text")
            return item
        if filed is not None and filed[1]:
            why = "a page filed under this URL first has items with this text"
            return self._duplicate(item, adapter, "canonical", url, url, why, fetched=fetched)
        digest = content_digest(normalized)
        found, fingerprint = self._match(digest, normalized, url, signature)
        if found is not None:
            kind, first, why, similarity = found
            return self._duplicate(
                item, adapter, kind, first, url, why, similarity, source=fetched
            )
        return self._keep(item, adapter, (url, fetched), digest, fingerprint, (filed, signature))

    def _place(
        self,
        adapter: MutableMapping[str, Any],
        url: str,
        text: NormalizedText | None,
        *,
        settled: bool,
    ) -> tuple[str, tuple[str, bool, int, str | None] | None, Any]:
        """``(the URL the item is kept under, its rel=canonical filing, the
        text's filing signature)``; the item's URL field is set to that URL.
        ``settled``: the item was held until the declared page's items came."""
        filed, signature = self._filing(url, text, settled=settled)
        if filed is not None and filed[0] != url:
            self._file_under(adapter, filed[0], url)
            return filed[0], filed, signature
        if self._cleaner is not None and url:
            # The URL the page declares its own, else the fetched one, without
            # what the URL rules drop (?utm_source=..., ;jsessionid=..., #top).
            own = filed[3] if filed is not None and filed[3] else url
            clean = self._cleaner.canonicalize(own)
            if clean != url and self._keep_fetched(adapter, url):
                adapter[self.url_field] = clean
                return clean, filed, signature
        return url, filed, signature

    def _match(
        self, digest: bytes, text: NormalizedText, url: str, signature: Any
    ) -> tuple[tuple[str, str, str, float | None] | None, Any]:
        """``((kind, kept URL, why, similarity) of the item kept with this
        text, or None; the text's near-duplicate fingerprint)``."""
        assert self.store is not None
        first = self.store.get_content(digest)
        if first is not None:
            if first == url and self._recrawled(url):
                why = "fetched again (DEDUP_RECRAWL_AFTER, or forgotten), its text has not changed"
                return ("unchanged", first, why, None), None
            return ("exact", first, "identical text", None), None
        fingerprint = self._near_fingerprint(text, signature)
        if fingerprint is None:
            return None, None
        assert self.near is not None
        if self.templates is not None:
            host, hashes = _host(url), self._shingles(text)
            fingerprint.template = self.templates.text(host, hashes)
            match = self.store.match_near(self.near, fingerprint)
            # Every page compared counts, dropped or kept: pages that share
            # only a template would otherwise never be kept to learn it from.
            self.templates.learn(host, hashes, digest)
            self._last_shingles = None  # not holding the text past its item
            if match is None and fingerprint.template.rejected:
                self.stats.inc_value("dedup/items/template_kept")
        else:
            match = self.store.match_near(self.near, fingerprint)
        # A page is never a duplicate of itself: its text changed a little
        # since an earlier run kept it (a recrawl, a forgotten URL).
        if match is None or match[0] == url:
            return None, fingerprint
        first, score = match
        similarity = score if isinstance(score, float) else None
        return ("near", first, self.near.describe(score), similarity), fingerprint

    def _keep(
        self,
        item: Any,
        adapter: MutableMapping[str, Any],
        urls: tuple[str, str],
        digest: bytes,
        fingerprint: Any,
        filing: tuple[tuple[str, bool, int, str | None] | None, Any],
    ) -> Any:
        """Record a kept item's text (and its fingerprints) under ``url``
        (``urls``: it and the URL the item was fetched from)."""
        assert self.store is not None
        url, fetched = urls
        # Only kept items' texts are recorded, so a duplicate always names a kept
        # item. Claiming the digest settles a race between workers with the same
        # text before the near-duplicate index names this item.
        first = self.store.add_content(digest, url)
        if first is not None:  # another worker kept the same text meanwhile
            return self._duplicate(
                item, adapter, "exact", first, url, "identical text", source=fetched
            )
        if fingerprint is not None:
            self.store.add_near(self.near, fingerprint, url)  # type: ignore[arg-type]
        filed, signature = filing
        if signature is not None and filed is not None:
            self.store.add_filed(filed[2], self._filing_method.encode(signature))
        self.stats.inc_value("dedup/items/unique")
        if self.report is not None and fetched and fetched != url:
            self.report.item_kept(url, fetched)
        if self.recrawls and self._recrawled(url):
            self.stats.inc_value("dedup/items/changed")
        return item

    def _refile(
        self, url: str, filed: tuple[str, bool, int, str | None], settled: bool
    ) -> tuple[str, bool, int, str | None]:
        """DEDUP_KEEP = "best": the filing of an item from ``url`` as if the
        items held for its page had not been filed there first; and of a held
        item once that page's items came (``settled``), as if those had."""
        if self.keeper is None:
            return filed
        if settled and filed[0] != url:
            return filed[0], True, filed[2], filed[3]
        if filed[1] and filed[0] == url and self.keeper.awaits(url):
            return filed[0], False, filed[2], filed[3]
        return filed

    def _note_worse_kept(self, kept: str, dropped: str) -> None:
        """DEDUP_REPORT: when the item dropped came from a plainer URL than the
        one kept (a print view kept, its page dropped), say which and why."""
        assert self.report is not None
        kept_from = self.report.kept_from(kept)
        if not dropped or kept_from == dropped:
            return
        if kept_from != kept:  # filed under its canonical (or clean) URL
            worse = plainer(dropped, kept_from, canonical=kept)
        else:  # two pages, one text: only a marked variant is a worse copy
            worse = marked_more(kept_from, dropped)
        if worse:
            self.report.worse_kept(kept, kept_from, dropped, self._kept_why)

    def _check_text_fields(self, adapter: MutableMapping[str, Any]) -> None:
        """Warn once when most of the first items have none of the text fields
        (``DEDUP_TEXT_FIELD`` misspelt): content dedup would do nothing."""
        lacking = self._lacking
        assert lacking is not None
        lacking[0] += 1
        if not any(name in adapter for name in self.text_fields):
            lacking[1] += 1
            self._fields_seen.update(str(name) for name in adapter)
        if lacking[0] >= _TEXT_FIELD_SAMPLE:
            self._warn_text_fields()

    def _warn_text_fields(self) -> None:
        lacking, self._lacking = self._lacking, None
        if lacking is None or not lacking[1] or 2 * lacking[1] <= lacking[0]:
            return
        fields = sorted(self._fields_seen)
        logger.warning(
            "%s of the first %s items have no %s field: their text is not compared "
            "(dedup/items/no_text). Set DEDUP_TEXT_FIELD to the field that holds the "
            "page's text; these items have: %s",
            lacking[1],
            lacking[0],
            " or ".join(self.text_fields),
            ", ".join(fields[:20]) + (f" and {len(fields) - 20} more" if len(fields) > 20 else "")
            if fields
            else "no field",
        )

    def _recrawled(self, url: str) -> bool:
        """Whether the page at ``url`` was kept by an earlier run and fetched
        again (its DEDUP_RECRAWL_AFTER passed, or it was forgotten). Keyed as a
        plain GET of ``url`` (by the project's request fingerprinter, if custom)."""
        if not url:
            return False
        assert self.store is not None
        return self.store.expired(self.state.keys.of_url(url))

    def _filing(
        self, url: str, text: NormalizedText | None, *, settled: bool = False
    ) -> tuple[tuple[str, bool, int, str | None] | None, Any]:
        """``((canonical URL, filed there first by another page, its key),
        the text's filing signature)`` of an item from the page at ``url``;
        ``(None, None)`` for an item filed under no canonical URL."""
        assert self.canonicals is not None
        filed = self.canonicals.get(url) if url else None
        if filed is None or text is None:
            return filed, None
        filed = self._refile(url, filed, settled)
        signature = (
            self._filing_method.fingerprint_of(text)
            if len(text.text) <= self.max_chars
            else self._filing_method.fingerprint(text.text[: self.max_chars])
        )
        if filed[1] and not self._close_to_filed(filed[2], signature):
            # A page declared a canonical URL another page was filed under, but
            # its items say otherwise (page 2 of a list declaring page 1): keep
            # them under the URL they were fetched from.
            self.stats.inc_value("dedup/canonical/ignored/content_differs")
            return None, None
        return filed, signature

    def _near_fingerprint(self, text: NormalizedText, signature: Any) -> Any:
        """The near-duplicate fingerprint of ``text``, ``None`` when it is too
        short to compare other than exactly (titles, one-line listings: there,
        one changed word is most of the text)."""
        if self.near is None:
            return None
        whole = len(text.text) <= self.max_chars
        # Tokens as shingles count them: a Chinese sentence is one "word".
        if not (
            text.has_more_tokens(self.min_words)
            if whole
            else has_more_tokens(text.text[: self.max_chars], self.min_words)
        ):
            return None
        if signature is not None and self.near is self._filing_compatible:
            return signature
        if self.templates is not None:  # the shingles serve the template too
            return signature_of(self._shingles(text))
        # Only the fingerprint is bounded: a 10 MB page still gets its exact
        # digest over the whole text.
        if whole:
            return self.near.fingerprint_of(text)
        return self.near.fingerprint(text.text[: self.max_chars])

    def _shingles(self, text: NormalizedText) -> Any:
        """The shingle hashes of ``text`` (bounded), computed once per item."""
        cached = self._last_shingles
        if cached is not None and cached[0] is text:
            return cached[1]
        assert isinstance(self.near, MinHashMethod)
        if len(text.text) <= self.max_chars:
            hashes = self.near.shingles_of(text)
        else:
            hashes = self.near.shingles(text.text[: self.max_chars])
        self._last_shingles = (text, hashes)
        return hashes

    def _close_to_filed(self, key: int, signature: Any) -> bool:
        """Whether an item's text resembles one of the items filed under the
        canonical URL of ``key`` (estimated Jaccard similarity of at least
        DEDUP_CANONICAL_MIN_SIMILARITY)."""
        assert self.store is not None
        for data in self.store.filed(key):
            try:
                other = self._filing_method.decode(data)
            except ValueError:  # recorded with other MinHash parameters
                continue
            if jaccard_estimate(signature, other) >= self.canonical_similarity:
                return True
        return False

    def _keep_fetched(self, adapter: MutableMapping[str, Any], fetched: str) -> bool:
        """Put the fetched URL in its field, if the item has one: a clean URL
        never replaces the fetched one without keeping it."""
        try:
            adapter[self.fetched_url_field] = fetched
        except KeyError:
            if not self._warned_clean:
                self._warned_clean = True
                logger.warning(
                    "%s items have no %s field: their URLs are left as fetched, tracking "
                    "parameters and all (DEDUP_ITEM_URL). Declare the field, or set "
                    "DEDUP_FETCHED_URL_FIELD or DEDUP_ITEM_URL = 'fetched'.",
                    type(getattr(adapter, "item", adapter)).__name__,
                    self.fetched_url_field,
                )
            return False
        return True

    def _file_under(self, adapter: MutableMapping[str, Any], canonical: str, fetched: str) -> None:
        """Put the canonical (or clean) URL in the URL field and keep the fetched one beside it."""
        adapter[self.url_field] = canonical
        try:
            adapter[self.fetched_url_field] = fetched
        except KeyError:
            if not self._warned_fetched:
                self._warned_fetched = True
                logger.warning(
                    "%s items have no %s field: items filed under their rel=canonical URL "
                    "do not keep the fetched URL. Declare the field or set "
                    "DEDUP_FETCHED_URL_FIELD.",
                    type(getattr(adapter, "item", adapter)).__name__,
                    self.fetched_url_field,
                )

    def _duplicate(
        self,
        item: Any,
        adapter: MutableMapping[str, Any],
        kind: str,
        first: str,
        url: str,
        why: str,
        similarity: float | None = None,
        fetched: str | None = None,
        source: str | None = None,
    ) -> Any:
        self.stats.inc_value(f"dedup/items/{kind}")
        if self.report is not None:
            if similarity is None and kind in ("exact", "unchanged"):
                similarity = 1.0
            # (An item filed under its page's rel=canonical: the page it came from.)
            self.report.item_dropped(kind, first, fetched or url, why, similarity)
            self._note_worse_kept(first, fetched or source or url)
        message = f"{kind} duplicate of {first or '(an item without URL)'} ({why})"
        if self.on_duplicate == "mark":
            try:
                adapter["duplicate_of"] = first or None
                adapter["duplicate_kind"] = kind
            except KeyError:
                self.stats.inc_value("dedup/items/mark_unsupported")
                if not self._warned_mark:
                    self._warned_mark = True
                    logger.warning(
                        "DEDUP_ON_DUPLICATE='mark' but %s items have no duplicate_of/"
                        "duplicate_kind fields: duplicates pass through unmarked. Declare the "
                        "two fields or use 'drop'.",
                        type(item).__name__,
                    )
            if self.debug:
                logger.info("Marked %s: %s", url, message)
            return item
        if self.debug:
            level = "INFO"
        elif not self._logged_first:
            self._logged_first = True
            level = "INFO"
            message += (
                " - further duplicates are logged at DEBUG (set DEDUP_DEBUG to log them at INFO)"
            )
        else:
            level = "DEBUG"
        raise DuplicateItem(message, log_level=level)


class _Hold(NamedTuple):
    """``_process``'s answer for an item to hold (``DEDUP_KEEP = "best"``):
    the key of the page it waits for, and the URL it was fetched from."""

    key: int
    url: str


def _host(url: str) -> str:
    """The host part of ``url`` (``""`` for an item without URL): the scope of a template."""
    return urlsplit(url).netloc.lower() if url else ""


def _as_url(value: Any) -> str:
    """The URL field's value as text; "" when the item has none."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)
