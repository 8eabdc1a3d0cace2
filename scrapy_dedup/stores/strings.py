"""StringList: an append-only list of strings, in their UTF-8 bytes plus 8
bytes each. No Scrapy import.

A Python list of URLs costs about 60 bytes of object header and pointer per
URL on top of its characters (about 150 bytes for a typical 90-character
URL); the near-duplicate index keeps one per kept text, so at 10M texts that
is 1.5 GB for URLs alone. Here the bytes go into fixed-size blocks, so an
append never copies what is stored (no doubling spike on the reactor thread).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

__all__ = ["StringList"]

_BLOCK = 1 << 20  # bytes per block; a longer string gets a block of its own
_EXTEND_CHUNK = 1 << 20  # strings per block of extend(): well under 4 GiB of them


class StringList:
    """Append-only strings, read back by position.

    >>> s = StringList()
    >>> s.append("https://a.example/"), s.append("https://b.example/ß"), len(s)
    (0, 1, 2)
    >>> s[1], s[-2]
    ('https://b.example/ß', 'https://a.example/')
    """

    def __init__(self) -> None:
        self._blocks: list[bytearray] = []
        # Per string: its block and its start there (it ends where the next
        # one starts, or with its block). Large arrays grow in place (mremap).
        self._where = array("Q")

    def __len__(self) -> int:
        return len(self._where)

    def append(self, text: str) -> int:
        """Store ``text``; its position."""
        data = text.encode("utf-8", "surrogatepass")
        block = self._blocks[-1] if self._blocks else None
        if block is None or len(block) + len(data) > _BLOCK:
            block = bytearray()
            self._blocks.append(block)
        start = len(block)
        block += data
        self._where.append(((len(self._blocks) - 1) << 32) | start)
        return len(self._where) - 1

    def extend(self, texts: Sequence[str]) -> None:
        """Store every string of ``texts``, in order, as one block per million
        (the same as as many :meth:`append` calls, in a fraction of their time)."""
        for start in range(0, len(texts), _EXTEND_CHUNK):
            encoded = [
                t.encode("utf-8", "surrogatepass") for t in texts[start : start + _EXTEND_CHUNK]
            ]
            ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded)))
            block = len(self._blocks)
            self._blocks.append(bytearray(b"".join(encoded)))
            starts = np.concatenate((np.zeros(1, dtype=np.uint64), ends[:-1]))
            starts |= np.uint64(block << 32)
            self._where.frombytes(starts.astype("=u8").tobytes())
        # A full block: the next append starts another.
        if texts:
            self._blocks.append(bytearray())

    def __getitem__(self, position: int) -> str:
        count = len(self)
        if position < 0:
            position += count
        if not 0 <= position < count:
            raise IndexError("StringList index out of range")
        where = self._where[position]
        block, start = where >> 32, where & 0xFFFFFFFF
        end = None
        if position + 1 < count and self._where[position + 1] >> 32 == block:
            end = self._where[position + 1] & 0xFFFFFFFF
        return self._blocks[block][start:end].decode("utf-8", "surrogatepass")

    def clear(self) -> None:
        self._blocks.clear()
        self._where = array("Q")

    def nbytes(self) -> int:
        """Bytes held: the strings' blocks and the positions."""
        return sum(len(b) for b in self._blocks) + self._where.itemsize * len(self._where)
