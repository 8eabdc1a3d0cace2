"""Where dedup state lives. No Scrapy import.

Components never talk to a database directly: they hold a store and ask it to
record a key. Keys are 64-bit integers (hashes computed by the caller), values
small integers the caller packs; a store only remembers the first value
recorded for a key.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from scrapy_dedup.near import NearIndex, NearMethod

__all__ = ["CompactMap", "DedupStore", "MemoryStore"]

logger = logging.getLogger(__name__)

_RECORD = 16  # bytes per persisted (key, value) pair: two little-endian uint64


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
    """The interface every store implements.

    ``add_url(key, info)`` records a request key: it returns ``None`` when the
    key is new, else the ``info`` recorded with it first. ``add_content``
    does the same for exact content digests, remembering the first URL;
    ``match_or_add_near`` returns the kept document a fingerprint is a near
    duplicate of, or records it as kept.
    """

    def get_content(self, digest: bytes) -> str | None:
        raise NotImplementedError

    def add_filed(self, key: int, fingerprint: Any) -> None:
        """Remember the text fingerprint of an item filed under a canonical URL."""
        raise NotImplementedError

    def filed_fingerprints(self, key: int) -> list[Any]:
        """The fingerprints of items filed under the canonical URL ``key``."""
        raise NotImplementedError

    def add_content(self, digest: bytes, url: str) -> str | None:
        raise NotImplementedError

    def match_or_add_near(
        self, method: NearMethod, fingerprint: Any, url: str
    ) -> tuple[str, Any] | None:
        """``(first URL, score)`` of the best near duplicate of ``fingerprint``
        among kept documents; when there is none, keep it under ``url`` and
        return ``None``."""
        raise NotImplementedError

    def add_url(self, key: int, info: int) -> int | None:
        raise NotImplementedError

    def get_url(self, key: int) -> int | None:
        raise NotImplementedError

    def url_count(self) -> int:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        """Make what was recorded durable (where the store persists at all)."""

    def close(self) -> None:
        """Flush and release resources; the store is not used afterwards."""


class MemoryStore(DedupStore):
    """In-process state; with ``directory`` (Scrapy's ``JOBDIR``) it is kept
    in an append-only file there and read back on the next run.

    The file is a sequence of 16-byte records. A torn last record (the process
    was killed mid-write) is dropped on load and the file cut back to the last
    whole record, so later appends stay aligned.
    """

    FILENAME = "dedup-urls.seen"

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._urls = CompactMap()
        self._content: dict[bytes, str] = {}

        self._near: dict[str, tuple[NearIndex, list[str]]] = {}
        self._filed: dict[int, list[Any]] = {}
        self._file = None
        self.path: Path | None = None
        if directory is not None:
            self.path = Path(directory, self.FILENAME)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a+b")
            self._load()

    def _load(self) -> None:
        assert self._file is not None
        self._file.seek(0)
        data = self._file.read()
        whole = len(data) - len(data) % _RECORD
        if whole != len(data):
            logger.warning(
                "Dropping a torn last record (%d bytes) from %s: the previous run "
                "was interrupted while writing it",
                len(data) - whole,
                self.path,
            )
            self._file.truncate(whole)
        pairs = np.frombuffer(data[:whole], dtype="<u8").reshape(-1, 2)
        if len(pairs):
            self._urls.update(pairs[:, 0], pairs[:, 1])
        self._file.seek(0, os.SEEK_END)

    def add_url(self, key: int, info: int) -> int | None:
        existing = self._urls.setdefault(key, info)
        if existing is None and self._file is not None:
            self._file.write(key.to_bytes(8, "little") + info.to_bytes(8, "little"))
        return existing

    def get_url(self, key: int) -> int | None:
        return self._urls.get(key)

    def url_count(self) -> int:
        return len(self._urls)

    def get_content(self, digest: bytes) -> str | None:
        return self._content.get(digest)

    def add_filed(self, key: int, fingerprint: Any) -> None:
        filed = self._filed.setdefault(key, [])
        if len(filed) < 32:  # a page's first items are enough to compare against
            filed.append(fingerprint)

    def filed_fingerprints(self, key: int) -> list[Any]:
        return self._filed.get(key, [])

    def add_content(self, digest: bytes, url: str) -> str | None:
        first = self._content.get(digest)
        if first is None:
            self._content[digest] = url
        return first

    def match_or_add_near(
        self, method: NearMethod, fingerprint: Any, url: str
    ) -> tuple[str, Any] | None:
        state = self._near.get(method.name)
        if state is None:
            state = self._near[method.name] = (method.new_index(), [])
        index, urls = state
        matches = index.query(fingerprint)
        if matches:
            doc_id, score = matches[0]
            return urls[doc_id], score
        index.add(fingerprint, len(urls))
        urls.append(url)
        return None

    def clear(self) -> None:
        self._urls.clear()
        self._content.clear()
        self._near.clear()
        self._filed.clear()

        if self._file is not None:
            self._file.truncate(0)
            self._file.seek(0)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
