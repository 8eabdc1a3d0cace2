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
from itertools import pairwise

import numpy as np
import numpy.typing as npt

__all__ = ["StringList"]

_BLOCK = 1 << 20  # bytes per block; a longer string gets a block of its own
_EXTEND_CHUNK = 1 << 20  # strings per block of extend(): well under 4 GiB of them
_NONE = np.empty(0, dtype=np.uint64)


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

    def packed(self) -> tuple[list[bytes], npt.NDArray[np.uint64]]:
        """Every string's UTF-8 bytes, in order, as pieces of at most a few
        MiB to concatenate, and where each string ends in their concatenation
        (for :meth:`from_packed`)."""
        where = np.frombuffer(self._where, dtype=np.uint64) if len(self._where) else _NONE
        sizes = np.fromiter(map(len, self._blocks), dtype=np.uint64, count=len(self._blocks))
        bases = np.concatenate((np.zeros(1, dtype=np.uint64), np.cumsum(sizes)))
        starts = bases[(where >> np.uint64(32)).astype(np.intp)] + (where & np.uint64(0xFFFFFFFF))
        ends = np.empty(len(where), dtype=np.uint64)
        ends[:-1] = starts[1:]
        if len(ends):
            ends[-1] = bases[-1]
        pieces = [
            bytes(block[i : i + _BLOCK])
            for block in self._blocks
            for i in range(0, len(block), _BLOCK)
        ]
        return pieces, ends

    @classmethod
    def from_packed(cls, data: bytes, ends: npt.NDArray[np.uint64]) -> StringList:
        """The StringList whose :meth:`packed` pieces concatenate to ``data``."""
        strings = cls()
        ends = np.asarray(ends, dtype=np.uint64)
        if not len(ends):
            return strings
        starts = np.concatenate((np.zeros(1, dtype=np.uint64), ends[:-1]))
        # Blocks of about _BLOCK bytes, cut where a string starts.
        cuts = np.unique(
            np.searchsorted(starts, np.arange(0, int(ends[-1]), _BLOCK, dtype=np.uint64))
        )
        block_of = np.searchsorted(cuts, np.arange(len(ends)), side="right") - 1
        edges = np.append(starts[cuts], ends[-1])
        strings._blocks = [bytearray(data[int(a) : int(b)]) for a, b in pairwise(edges)]
        where = (starts - starts[cuts][block_of]) | (block_of.astype(np.uint64) << np.uint64(32))
        strings._where.frombytes(where.astype("=u8").tobytes())
        strings._blocks.append(bytearray())  # the next append starts another
        return strings

    def clear(self) -> None:
        self._blocks.clear()
        self._where = array("Q")

    def nbytes(self) -> int:
        """Bytes held: the strings' blocks and the positions."""
        return sum(len(b) for b in self._blocks) + self._where.itemsize * len(self._where)
