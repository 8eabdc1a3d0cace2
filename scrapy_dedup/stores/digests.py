"""DigestMap: text digests to the URL kept with each, without a Python object
per entry. No Scrapy import.

A ``dict[bytes, str]`` of 16-byte digests costs about 170 bytes per kept text
for a 41-character URL (the digest's bytes object, the URL's str object, the
dict's slots). Here a digest's first 8 bytes go into a
:class:`~scrapy_dedup.stores.compact.CompactMap` (to the entry's position),
its last 8 into an ``array('Q')`` and the URL into a
:class:`~scrapy_dedup.stores.strings.StringList`: about 16-30 + 8 + 8 bytes
beside the URL's UTF-8.
"""

from __future__ import annotations

from array import array

from scrapy_dedup.stores.compact import CompactMap
from scrapy_dedup.stores.strings import StringList

__all__ = ["DigestMap"]

_DIGEST_BYTES = 16


class DigestMap:
    """The part of ``dict[bytes, str]`` a store uses, for 16-byte digests.

    A digest of another size, or one whose first 8 bytes another digest has
    already (once in 2**64 pairs), or one set again after a deletion, is kept
    in a small dict beside the arrays.

    >>> m = DigestMap()
    >>> m[b"d" * 16] = "https://a.example/"
    >>> m.get(b"d" * 16), m.get(b"e" * 16), len(m)
    ('https://a.example/', None, 1)
    >>> del m[b"d" * 16]
    >>> b"d" * 16 in m, len(m)
    (False, 0)
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._heads = CompactMap()  # first 8 bytes -> position
        self._tails = array("Q")  # last 8 bytes, by position
        self._urls = StringList()
        self._gone: set[int] = set()  # positions deleted
        self._more: dict[bytes, str] = {}
        # The position of the URL the last setdefault() recorded in the
        # arrays (None after one it recorded in the dict, or none at all).
        self.last_position: int | None = None

    def _position(self, digest: bytes) -> int | None:
        position = self._heads.get(int.from_bytes(digest[:8], "little"))
        if (
            position is None
            or self._tails[position] != int.from_bytes(digest[8:], "little")
            or (self._gone and position in self._gone)
        ):
            return None
        return position

    def get(self, digest: bytes, default: str | None = None) -> str | None:
        if len(digest) == _DIGEST_BYTES:
            position = self._heads.get(int.from_bytes(digest[:8], "little"))
            if position is None:
                return default  # (the common miss: one lookup)
            if self._tails[position] == int.from_bytes(digest[8:], "little") and (
                not self._gone or position not in self._gone
            ):
                return self._urls[position]
        return self._more.get(digest, default) if self._more else default

    def setdefault(self, digest: bytes, url: str) -> str | None:
        """Record ``url`` for a new ``digest`` and return ``None``; for a known
        one change nothing and return its URL (one lookup either way)."""
        if len(digest) == _DIGEST_BYTES:
            tail = int.from_bytes(digest[8:], "little")
            position = len(self._tails)
            found = self._heads.setdefault(int.from_bytes(digest[:8], "little"), position)
            if found is None:
                self._urls.append(url)
                self._tails.append(tail)
                self.last_position = position
                return None
            if self._tails[found] == tail and (not self._gone or found not in self._gone):
                return self._urls[found]
        first = self._more.get(digest)
        if first is None:
            self._more[digest] = url
            self.last_position = None
        return first

    def url_at(self, position: int) -> str:
        """The URL recorded at ``position`` (a :attr:`last_position`), even
        if its digest was deleted or set again since: URLs are never removed."""
        return self._urls[position]

    def __contains__(self, digest: bytes) -> bool:
        return self.get(digest) is not None

    def __setitem__(self, digest: bytes, url: str) -> None:
        if len(digest) == _DIGEST_BYTES:
            head = int.from_bytes(digest[:8], "little")
            position = self._heads.get(head)
            if position is None:
                position = self._urls.append(url)
                self._tails.append(int.from_bytes(digest[8:], "little"))
                self._heads.setdefault(head, position)
                return
            if self._position(digest) is not None:  # set again: the new URL wins
                self._gone.add(position)
        self._more[digest] = url

    def __delitem__(self, digest: bytes) -> None:
        if digest in self._more:
            del self._more[digest]
            return
        position = self._position(digest) if len(digest) == _DIGEST_BYTES else None
        if position is None:
            raise KeyError(digest)
        self._gone.add(position)

    def __len__(self) -> int:
        return len(self._urls) - len(self._gone) + len(self._more)

    def nbytes(self) -> int:
        """Bytes held by the arrays and the URLs (the buffers and the dict not counted)."""
        return self._heads.nbytes() + self._tails.itemsize * len(self._tails) + self._urls.nbytes()
