"""ContentDedupPipeline: drop (or mark) items whose text was already kept."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import DropItem, NotConfigured

from scrapy_dedup import defaults
from scrapy_dedup._crawler_store import CanonicalMap, acquire_store, canonical_map, release_store
from scrapy_dedup.minhash import jaccard_estimate
from scrapy_dedup.near import MinHashMethod, NearMethod, make_method
from scrapy_dedup.text import content_digest, extract_text

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from scrapy_dedup.stores import DedupStore

__all__ = ["ContentDedupPipeline", "DuplicateItem"]

logger = logging.getLogger(__name__)


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
        settings = crawler.settings
        if not settings.getbool(
            "DEDUP_CONTENT_ENABLED", defaults.DEFAULTS["DEDUP_CONTENT_ENABLED"]
        ):
            raise NotConfigured("DEDUP_CONTENT_ENABLED is False")
        self.crawler = crawler
        self.text_fields = _field_list(settings, "DEDUP_TEXT_FIELD")
        self.url_field = settings.get("DEDUP_URL_FIELD") or defaults.DEFAULTS["DEDUP_URL_FIELD"]
        self.fetched_url_field = (
            settings.get("DEDUP_FETCHED_URL_FIELD") or defaults.DEFAULTS["DEDUP_FETCHED_URL_FIELD"]
        )
        self.on_duplicate = settings.get(
            "DEDUP_ON_DUPLICATE", defaults.DEFAULTS["DEDUP_ON_DUPLICATE"]
        )
        if self.on_duplicate not in ("drop", "mark"):
            raise ValueError(
                f"DEDUP_ON_DUPLICATE must be 'drop' or 'mark', got {self.on_duplicate!r}"
            )
        try:
            self.near: NearMethod | None = make_method(
                settings.get("DEDUP_NEAR_METHOD", defaults.DEFAULTS["DEDUP_NEAR_METHOD"]),
                threshold=settings.getfloat(
                    "DEDUP_NEAR_THRESHOLD", defaults.DEFAULTS["DEDUP_NEAR_THRESHOLD"]
                ),
                max_distance=settings.getint(
                    "DEDUP_SIMHASH_MAX_DISTANCE", defaults.DEFAULTS["DEDUP_SIMHASH_MAX_DISTANCE"]
                ),
            )
        except ValueError as exc:
            raise ValueError(f"invalid DEDUP_NEAR_* setting: {exc}") from exc
        self.max_chars = settings.getint(
            "DEDUP_MAX_TEXT_CHARS", defaults.DEFAULTS["DEDUP_MAX_TEXT_CHARS"]
        )
        self.min_words = settings.getint(
            "DEDUP_NEAR_MIN_WORDS", defaults.DEFAULTS["DEDUP_NEAR_MIN_WORDS"]
        )
        if self.max_chars < 1000 or self.min_words < 1:
            raise ValueError(
                "DEDUP_MAX_TEXT_CHARS must be at least 1000 and DEDUP_NEAR_MIN_WORDS at least 1, "
                f"got {self.max_chars} and {self.min_words}"
            )
        self.debug = settings.getbool("DEDUP_DEBUG")
        self.stats = crawler.stats
        self._logged_first = False
        self._warned_mark = False
        self.canonical_similarity = settings.getfloat(
            "DEDUP_CANONICAL_MIN_SIMILARITY", defaults.DEFAULTS["DEDUP_CANONICAL_MIN_SIMILARITY"]
        )
        self._filing = MinHashMethod(threshold=max(self.canonical_similarity, 0.01))
        # The default near method computes the very same signature: reuse it then.
        self._filing_compatible = (
            self.near
            if isinstance(self.near, MinHashMethod) and self.near.num_perm == self._filing.num_perm
            else None
        )
        self.store: DedupStore | None = None
        self.canonicals: CanonicalMap | None = None
        self._warned_fetched = False
        # Writes of kept items wait until the item is out of every pipeline,
        # so a store that outlives the run never records an item that was lost.
        self._held: dict[int, tuple[Any, Any]] = {}
        crawler.signals.connect(self._item_done, signal=signals.item_scraped)
        crawler.signals.connect(self._item_lost, signal=signals.item_dropped)
        crawler.signals.connect(self._item_lost, signal=signals.item_error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def open_spider(self) -> None:
        self.store = acquire_store(self.crawler)
        self.canonicals = canonical_map(self.crawler)

    def close_spider(self) -> None:
        if self._held:
            # A later pipeline returned another object than it was given: the
            # item came out, but its text is not recorded for later runs.
            self.stats.inc_value("dedup/items/unrecorded", len(self._held))
            self._held.clear()
        if self.store is not None:
            release_store(self.crawler)
            self.store = None

    async def process_item(self, item: Any) -> Any:
        if self.store is None:  # used without open_spider (e.g. called directly)
            self.open_spider()
        assert self.store is not None
        with self.store.hold() as held:
            try:
                result = self._process(item)
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
            self.store.release(entry[1])

    def _item_lost(self, item: Any) -> None:
        entry = self._held.pop(id(item), None)
        if entry is not None and self.store is not None:
            self.store.discard(entry[1])

    def _process(self, item: Any) -> Any:
        assert self.store is not None and self.canonicals is not None
        adapter = ItemAdapter(item)
        url = _as_url(adapter.get(self.url_field))
        filed = self.canonicals.get(url) if url else None
        text = extract_text(adapter, self.text_fields)
        signature = None
        if filed is not None and text is not None:
            signature = self._filing.fingerprint(text[: self.max_chars])
            if filed[1] and not self._close_to_filed(filed[2], signature):
                # A page declared a canonical URL another page was filed under, but
                # its items say otherwise (page 2 of a list declaring page 1): keep
                # them under the URL they were fetched from.
                self.stats.inc_value("dedup/canonical/ignored/content_differs")
                filed, signature = None, None
        if filed is not None and filed[0] != url:
            self._file_under(adapter, filed[0], url)
            url = filed[0]
        if text is None:
            self.stats.inc_value("dedup/items/no_text")
            return item
        if filed is not None and filed[1]:
            why = "a page filed under this URL first has items with this text"
            return self._duplicate(item, adapter, "canonical", url, url, why)

        digest = content_digest(text)
        first = self.store.get_content(digest)
        if first is not None:
            return self._duplicate(item, adapter, "exact", first, url, "identical text")
        # Short texts (titles, one-line listings) get exact matching only: there,
        # one changed word is most of the text.
        fingerprint = None
        if self.near is not None and len(text.split(maxsplit=self.min_words)) > self.min_words:
            # Only the fingerprint is bounded: a 10 MB page still gets its exact
            # digest over the whole text above.
            sample = text if len(text) <= self.max_chars else text[: self.max_chars]
            fingerprint = (
                signature
                if signature is not None and self.near is self._filing_compatible
                else self.near.fingerprint(sample)
            )
            match = self.store.match_near(self.near, fingerprint)
            if match is not None:
                first, score = match
                return self._duplicate(
                    item, adapter, "near", first, url, self.near.describe(score)
                )
        # Only kept items' texts are recorded, so a duplicate always names a kept
        # item. Claiming the digest settles a race between workers with the same
        # text before the near-duplicate index names this item.
        first = self.store.add_content(digest, url)
        if first is not None:  # another worker kept the same text meanwhile
            return self._duplicate(item, adapter, "exact", first, url, "identical text")
        if fingerprint is not None:
            self.store.add_near(self.near, fingerprint, url)  # type: ignore[arg-type]
        if signature is not None and filed is not None:
            self.store.add_filed(filed[2], self._filing.encode(signature))
        self.stats.inc_value("dedup/items/unique")
        return item

    def _close_to_filed(self, key: int, signature: Any) -> bool:
        """Whether an item's text resembles one of the items filed under the
        canonical URL of ``key`` (estimated Jaccard similarity of at least
        DEDUP_CANONICAL_MIN_SIMILARITY)."""
        assert self.store is not None
        for data in self.store.filed(key):
            try:
                other = self._filing.decode(data)
            except ValueError:  # recorded with other MinHash parameters
                continue
            if jaccard_estimate(signature, other) >= self.canonical_similarity:
                return True
        return False

    def _file_under(self, adapter: ItemAdapter, canonical: str, fetched: str) -> None:
        """Put the canonical URL in the URL field and keep the fetched one beside it."""
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
                    type(adapter.item).__name__,
                    self.fetched_url_field,
                )

    def _duplicate(
        self, item: Any, adapter: ItemAdapter, kind: str, first: str, url: str, why: str
    ) -> Any:
        self.stats.inc_value(f"dedup/items/{kind}")
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


def _as_url(value: Any) -> str:
    """The URL field's value as text; "" when the item has none."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _field_list(settings: Any, name: str) -> list[str]:
    fields = settings.getlist(name) if settings.get(name) else [defaults.DEFAULTS[name]]
    if not all(isinstance(f, str) and f.strip() for f in fields):
        raise ValueError(f"{name} must be a field name or a list of names, got {fields!r}")
    return [f.strip() for f in fields]
