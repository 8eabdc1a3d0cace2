"""An index of 64-bit SimHash fingerprints that finds every stored fingerprint
within a few bits of a query.

The method is the permuted-table index of Manku, Jain and Das Sarma,
"Detecting Near-Duplicates for Web Crawling" (WWW 2007). For a maximum distance
``k`` the 64 bits are cut into ``k + 1`` blocks of consecutive bits. Two
fingerprints that differ in at most ``k`` bits differ in at most ``k`` blocks, so
(pigeonhole) they agree exactly on at least one block. Table ``j`` finds the
stored fingerprints that agree with the query on block ``j``; checking those
candidates' real distance gives exactly the brute-force answer, only faster.

Each table is a sorted array (rows ordered by the block's leading bits, with a
bucket offset array) instead of a hash map per entry, so a million fingerprints
cost tens of bytes each instead of kilobytes. New fingerprints go to a small
buffer of Python dicts and are merged into the sorted arrays in bulk when the
buffer reaches 1/8 of the sorted part, so inserts and queries can interleave.
No Scrapy import.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scrapy_dedup.text._hashing import MASK64

__all__ = ["MAX_DISTANCE", "SimhashIndex"]

#: Largest supported ``max_distance``. Each unit adds a table (about 4 bytes per
#: fingerprint) and shrinks the blocks, so queries slow down as it grows.
MAX_DISTANCE = 8


# Merge the buffer when it holds this many entries or 1/8 of the sorted part.
_MIN_BUFFER = 1024
_BUFFER_FRACTION = 8
_MAX_ROWS = 2**32 - 1


class _Table:
    """One block of the fingerprint. The sorted part's fingerprints (and their row
    numbers) ordered by the block's top ``bits`` bits; ``offsets[v] ..
    offsets[v + 1]`` are the positions whose value is ``v``."""

    __slots__ = ("bits", "fingerprints", "lo", "mask", "offsets", "rows", "shift")

    def __init__(self, lo: int, width: int) -> None:
        self.lo = lo
        self.mask = (1 << width) - 1
        self.bits = 0
        self.shift = width
        self.offsets: memoryview = np.zeros(2, dtype=np.uint32).data
        self.fingerprints: npt.NDArray[np.uint64] = np.empty(0, dtype=np.uint64)
        self.rows: memoryview = np.empty(0, dtype=np.uint32).data

    def rebuild(self, fingerprints: npt.NDArray[np.uint64]) -> None:
        width = self.mask.bit_length()
        # About one row per bucket: the offset array costs at most 4 bytes a row.
        self.bits = min(width, max(len(fingerprints).bit_length() - 1, 0))
        self.shift = width - self.bits
        keys = (fingerprints >> np.uint64(self.lo)) & np.uint64(self.mask)
        keys >>= np.uint64(self.shift)
        # numpy radix-sorts 16-bit keys.
        small = keys.astype(np.uint16 if self.bits <= 16 else np.uint32)
        order = np.argsort(small, kind="stable")
        self.fingerprints = fingerprints[order]
        self.rows = order.astype(np.uint32).data
        counts = np.bincount(small, minlength=1 << self.bits)
        offsets = np.zeros(len(counts) + 1, dtype=np.uint32)
        np.cumsum(counts, out=offsets[1:])
        self.offsets = offsets.data

    def nbytes(self) -> int:
        return self.fingerprints.nbytes + self.rows.nbytes + self.offsets.nbytes


class SimhashIndex:
    """Find stored 64-bit fingerprints within *max_distance* differing bits.

    ``add`` and ``query`` may interleave freely; ``query`` returns exactly what a
    scan of every stored fingerprint would. Fingerprints must be unsigned 64-bit
    integers; doc ids are any signed 64-bit integers (duplicates allowed, each
    ``add`` is its own entry).

    >>> index = SimhashIndex(max_distance=3)
    >>> index.add(0b1011_0000, doc_id=1)
    >>> index.add(0b1011_0111, doc_id=2)
    >>> index.add(0xFFFF_FFFF, doc_id=3)
    >>> index.query(0b1011_0001)
    [(1, 1), (2, 2)]
    >>> len(index)
    3
    """

    def __init__(self, max_distance: int = 3) -> None:
        if not 0 <= max_distance <= MAX_DISTANCE:
            raise ValueError(
                f"max_distance must be between 0 and {MAX_DISTANCE}, got {max_distance}"
            )
        self.max_distance = max_distance
        blocks = max_distance + 1
        self._tables: list[_Table] = []
        lo = 0
        for j in range(blocks):
            width = 64 // blocks + (1 if j < 64 % blocks else 0)
            self._tables.append(_Table(lo, width))
            lo += width
        # Doc ids of the sorted part in insertion order (tables hold row numbers).
        self._doc_ids: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
        # The buffer: recent entries, and per table block value -> buffer positions.
        self._buffer_fingerprints: list[int] = []
        self._buffer_doc_ids: list[int] = []
        self._buffer_maps: list[dict[int, list[int]]] = [{} for _ in self._tables]
        self._buffer_limit = _MIN_BUFFER

    def __len__(self) -> int:
        return len(self._doc_ids) + len(self._buffer_fingerprints)

    def add(self, fingerprint: int, doc_id: int) -> None:
        """Store *fingerprint* under *doc_id*."""
        if not 0 <= fingerprint <= MASK64:
            raise ValueError(f"fingerprint must be an unsigned 64-bit integer, got {fingerprint}")
        position = len(self._buffer_fingerprints)
        self._buffer_fingerprints.append(fingerprint)
        self._buffer_doc_ids.append(doc_id)
        for table, buffer_map in zip(self._tables, self._buffer_maps, strict=True):
            key = (fingerprint >> table.lo) & table.mask
            bucket = buffer_map.get(key)
            if bucket is None:
                buffer_map[key] = [position]
            else:
                bucket.append(position)
        if position + 1 >= self._buffer_limit:
            self._merge()

    def update(self, fingerprints: npt.ArrayLike, doc_ids: npt.ArrayLike) -> None:
        """Store many fingerprints at once (e.g. saved state from :meth:`arrays`)."""
        new_fingerprints = np.asarray(fingerprints)
        new_ids = np.asarray(doc_ids, dtype=np.int64)
        if new_fingerprints.shape != new_ids.shape or new_fingerprints.ndim != 1:
            raise ValueError("fingerprints and doc_ids must be 1-D arrays of the same length")
        if new_fingerprints.dtype != np.uint64:
            if len(new_fingerprints) and (
                new_fingerprints.dtype.kind not in "iu" or new_fingerprints.min() < 0
            ):
                raise ValueError("fingerprints must be unsigned 64-bit integers")
            new_fingerprints = new_fingerprints.astype(np.uint64)
        self._merge(new_fingerprints, new_ids)

    def arrays(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """Return ``(fingerprints, doc_ids)`` of every entry, in insertion order."""
        self._merge()
        return self._sorted_fingerprints(), self._doc_ids.copy()

    def query(self, fingerprint: int) -> list[tuple[int, int]]:
        """Return ``(doc_id, distance)`` for every stored fingerprint within
        ``max_distance`` bits of *fingerprint*, sorted by distance, then doc id."""
        if not 0 <= fingerprint <= MASK64:
            raise ValueError(f"fingerprint must be an unsigned 64-bit integer, got {fingerprint}")
        limit = self.max_distance
        found: dict[int, tuple[int, int]] = {}
        slices = []
        segments = []
        for table in self._tables:
            offsets = table.offsets
            key = ((fingerprint >> table.lo) & table.mask) >> table.shift
            start = offsets[key]
            end = offsets[key + 1]
            if end > start:
                slices.append(table.fingerprints[start:end])
                segments.append((end - start, start, table.rows))
        if slices:
            # One vectorized distance check over every table's candidates.
            candidates = np.concatenate(slices) if len(slices) > 1 else slices[0].copy()
            np.bitwise_xor(candidates, fingerprint, out=candidates)
            distances = np.bitwise_count(candidates)
            hits = (distances <= limit).nonzero()[0]
            if len(hits):
                doc_ids = self._doc_ids
                for hit in hits.tolist():
                    offset = hit
                    for length, start, rows in segments:
                        if offset < length:
                            row = rows[start + offset]
                            break
                        offset -= length
                    found[row] = (int(doc_ids[row]), int(distances[hit]))
        if self._buffer_fingerprints:
            base = len(self._doc_ids)
            buffered = self._buffer_fingerprints
            for table, buffer_map in zip(self._tables, self._buffer_maps, strict=True):
                bucket = buffer_map.get((fingerprint >> table.lo) & table.mask)
                if bucket is None:
                    continue
                for position in bucket:
                    distance = (buffered[position] ^ fingerprint).bit_count()
                    if distance <= limit:
                        found[base + position] = (self._buffer_doc_ids[position], distance)
        return sorted(found.values(), key=_by_distance)

    def nbytes(self) -> int:
        """Bytes held in numpy arrays (the sorted part; the buffer is not counted)."""
        return self._doc_ids.nbytes + sum(table.nbytes() for table in self._tables)

    def _sorted_fingerprints(self) -> npt.NDArray[np.uint64]:
        """The sorted part's fingerprints in insertion order, rebuilt from table 0."""
        table = self._tables[0]
        fingerprints = np.empty(len(table.fingerprints), dtype=np.uint64)
        fingerprints[np.asarray(table.rows)] = table.fingerprints
        return fingerprints

    def _merge(
        self,
        extra_fingerprints: npt.NDArray[np.uint64] | None = None,
        extra_doc_ids: npt.NDArray[np.int64] | None = None,
    ) -> None:
        """Move the buffer (and any extra arrays) into the sorted part."""
        parts = [self._sorted_fingerprints()]
        id_parts = [self._doc_ids]
        if self._buffer_fingerprints:
            parts.append(np.array(self._buffer_fingerprints, dtype=np.uint64))
            id_parts.append(np.array(self._buffer_doc_ids, dtype=np.int64))
        if extra_fingerprints is not None and extra_doc_ids is not None:
            parts.append(extra_fingerprints)
            id_parts.append(extra_doc_ids)
        if len(parts) == 1:
            return
        fingerprints = np.concatenate(parts)
        if len(fingerprints) > _MAX_ROWS:
            raise ValueError(f"SimhashIndex holds at most {_MAX_ROWS} fingerprints")
        self._doc_ids = np.concatenate(id_parts)
        for table in self._tables:
            table.rebuild(fingerprints)
        self._buffer_fingerprints = []
        self._buffer_doc_ids = []
        self._buffer_maps = [{} for _ in self._tables]
        self._buffer_limit = max(_MIN_BUFFER, len(fingerprints) // _BUFFER_FRACTION)


def _by_distance(item: tuple[int, int]) -> tuple[int, int]:
    return item[1], item[0]
