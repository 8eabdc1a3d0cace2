"""MemoryStore: dedup state in this process, gone when it ends. No Scrapy import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_dedup.stores.base import FILED_LIMIT, DedupStore
from scrapy_dedup.stores.compact import CompactMap
from scrapy_dedup.stores.digests import DigestMap
from scrapy_dedup.stores.strings import StringList

if TYPE_CHECKING:
    from scrapy_dedup.text.near import NearIndex, NearMethod

__all__ = ["MemoryStore"]


class MemoryStore(DedupStore):
    """In-process state, gone when the process ends."""

    # The near index names the exact digests' copy of a kept URL rather than
    # a second one of its own (about 50 bytes a kept text).
    _shares_urls = True

    def __init__(self) -> None:
        self._urls = CompactMap()
        # Text digests -> URL, in arrays (a dict costs about 170 bytes a text).
        self._content = DigestMap()
        self._near: dict[str, tuple[NearIndex, StringList]] = {}
        # The URL add_content() just recorded and its position there: the
        # near index names that position instead of storing the URL again
        # (the pipeline adds a kept text's digest, then its fingerprint).
        self._last_kept: tuple[str, int] | None = None
        self._filed: dict[int, list[bytes]] = {}
        self._claims = CompactMap()

    @classmethod
    def from_uri(
        cls, uri: str, namespace: str, *, jobdir: str | None = None, prefix: str = "dedup"
    ) -> MemoryStore:
        """``memory`` (with ``JOBDIR``, :func:`~scrapy_dedup.stores.open_store`
        opens an SQLite file in the job directory instead)."""
        if uri.strip().lower() not in ("memory", "memory:", "memory://"):
            raise ValueError(f"DEDUP_STORE={uri!r}: the memory store takes no options")
        return cls()

    def add_url(self, key: int, info: int) -> int | None:
        return self._urls.setdefault(key, info)

    def get_url(self, key: int) -> int | None:
        return self._urls.get(key)

    def url_count(self) -> int:
        return len(self._urls)

    def get_content(self, digest: bytes) -> str | None:
        return self._content.get(digest)

    def add_content(self, digest: bytes, url: str) -> str | None:
        first = self._content.setdefault(digest, url)
        if first is None:
            position = self._content.last_position
            self._last_kept = None if position is None else (url, position)
        return first

    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        index, urls = self._near_state(method)
        matches = index.query(fingerprint)
        if matches:
            doc, score = matches[0]
            if not self._shares_urls:
                return urls[doc], score
            return (self._content.url_at(doc) if doc >= 0 else urls[~doc]), score
        return None

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        """Doc ids: a position of the exact digests' URLs (the URL the last
        kept text was recorded under), else ``~position`` in the index's own
        (without ``_shares_urls``: always the position in its own)."""
        index, urls = self._near_state(method)
        last = self._last_kept
        if not self._shares_urls:
            index.add(fingerprint, urls.append(url))
        elif last is not None and last[0] == url:
            index.add(fingerprint, last[1])
        else:
            index.add(fingerprint, ~urls.append(url))

    def _near_state(self, method: NearMethod) -> tuple[NearIndex, StringList]:
        state = self._near.get(method.name)
        if state is None:
            # URLs not among the exact digests' (rare), as bytes in blocks.
            state = self._near[method.name] = (method.new_index(), StringList())
        return state

    def claim(self, key: int, owner: int) -> int | None:
        return self._claims.setdefault(key, owner)

    def add_filed(self, key: int, data: bytes) -> bool:
        filed = self._filed.setdefault(key, [])
        if len(filed) >= FILED_LIMIT:
            return False
        filed.append(data)
        return True

    def filed(self, key: int) -> list[bytes]:
        return self._filed.get(key, [])

    def clear(self, urls_only: bool = False) -> None:
        self._urls.clear()
        if not urls_only:
            self._claims.clear()
            self._content.clear()
            self._last_kept = None
            self._near.clear()
            self._filed.clear()
