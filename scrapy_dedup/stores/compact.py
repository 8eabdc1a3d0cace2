"""CompactMap: a uint64 -> uint64 map in about 16-30 bytes an entry. No Scrapy import."""

from __future__ import annotations

from array import array
from bisect import bisect_left

import numpy as np

__all__ = ["CompactMap"]

_SLOT_BITS = 12  # the directory has 4096 slots, picked by the top 12 bits of a key
_SLOTS = 1 << _SLOT_BITS
_SLOT_SHIFT = 64 - _SLOT_BITS  # written out as 52 in the hot paths (a literal is faster)
_EMPTY = np.empty(0, dtype=np.uint64)


class _Shard:
    """The entries whose keys fall in directory slots ``lo`` to ``hi - 1``:
    sorted arrays, plus the recent entries in a dict (for lookups) and in two
    ``array('Q')`` in insertion order (for the merge: reading back thousands
    of int objects scattered in memory costs far more than appending each
    while it is fresh)."""

    __slots__ = (
        "buffer",
        "hi",
        "key_view",
        "keys",
        "limit",
        "lo",
        "new_keys",
        "new_values",
        "value_view",
        "values",
    )

    def __init__(self, lo: int, hi: int, keys: np.ndarray, values: np.ndarray, limit: int) -> None:
        self.lo, self.hi = lo, hi
        self.keys, self.values = keys, values
        self.key_view, self.value_view = keys.data, values.data
        self.limit = limit  # merge the buffer once it holds this many entries
        self.buffer: dict[int, int] = {}
        self.new_keys, self.new_values = array("Q"), array("Q")


class CompactMap:
    """A map from uint64 to uint64 in about 16-30 bytes per entry.

    Python's ``set`` of 20-byte digests (Scrapy's ``RFPDupeFilter``) costs
    about 80-133 bytes per entry. Here most entries sit in sorted numpy arrays
    searched with :func:`bisect.bisect_left`; recent ones wait in a small
    buffer that is merged in once it reaches an eighth of the arrays.

    The arrays are cut into shards by the top bits of the key (keys are
    hashes, so shards fill evenly). A directory of 4096 slots maps the top 12
    bits of a key to its shard; a shard that grows past ``_SPLIT`` entries is
    cut in two at its merge. A merge touches one shard, at most about
    ``_SPLIT * 9 / 8`` entries, so no call waits for the whole map to be
    rewritten (beyond ``4096 * _SPLIT`` keys, about 33 million, shards grow
    again: a slot is not cut).

    >>> m = CompactMap()
    >>> m.setdefault(7, 1) is None, m.setdefault(7, 2), len(m)
    (True, 1, 1)
    """

    _MIN_BUFFER = 256  # smallest buffer of a shard that is merged
    _BUFFER_SHIFT = 3  # else merge once the buffer holds 1/8 of the shard's arrays
    _SPLIT = 8192  # a merged shard above this many entries is cut in two

    def __init__(self) -> None:
        self._slots: list[_Shard] = []
        self.clear()

    def __len__(self) -> int:
        return sum(len(shard.keys) + len(shard.buffer) for shard in self._shards())

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def get(self, key: int) -> int | None:
        try:
            shard = self._slots[key >> 52]  # _SLOT_SHIFT
        except IndexError:  # above 2**64 - 1 (a negative key is simply not found)
            return None
        value = shard.buffer.get(key)
        if value is not None:
            return value
        keys = shard.key_view
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return int(shard.value_view[i])
        return None

    def setdefault(self, key: int, value: int) -> int | None:
        """Record ``value`` for a new ``key`` and return ``None``; for a known
        key change nothing and return its first value."""
        try:
            shard = self._slots[key >> 52]  # _SLOT_SHIFT
        except IndexError:
            raise OverflowError(f"CompactMap keys are uint64, not {key}") from None
        buffer = shard.buffer
        existing = buffer.get(key)
        if existing is not None:
            return existing
        keys = shard.key_view
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return int(shard.value_view[i])
        shard.new_keys.append(key)  # OverflowError for a negative key
        try:
            shard.new_values.append(value)
        except BaseException:
            shard.new_keys.pop()
            raise
        buffer[key] = value
        if len(buffer) >= shard.limit:
            self._merge(shard)
        return None

    def update(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Bulk-load pairs; for a repeated key the first value wins."""
        old_keys, old_values = [_EMPTY], [_EMPTY]
        for shard in self._shards():
            old_keys += (shard.keys, np.frombuffer(shard.new_keys, dtype=np.uint64))
            old_values += (shard.values, np.frombuffer(shard.new_values, dtype=np.uint64))
        all_keys = np.concatenate([*old_keys, np.asarray(keys).astype(np.uint64)])
        all_values = np.concatenate([*old_values, np.asarray(values).astype(np.uint64)])
        del old_keys, old_values
        # The entries already here come first, so they win over the new ones.
        all_keys, first = np.unique(all_keys, return_index=True)
        all_values = all_values[first]
        del first
        self._build(0, _SLOTS, all_keys, all_values)

    def clear(self) -> None:
        self._slots = [_Shard(0, _SLOTS, _EMPTY, _EMPTY, self._MIN_BUFFER)] * _SLOTS

    def nbytes(self) -> int:
        """Bytes held by the sorted arrays (the buffers not counted)."""
        return sum(int(shard.keys.nbytes + shard.values.nbytes) for shard in self._shards())

    def _shards(self) -> list[_Shard]:
        shards, slot, slots = [], 0, self._slots
        while slot < _SLOTS:
            shard = slots[slot]
            shards.append(shard)
            slot = shard.hi
        return shards

    def _merge(self, shard: _Shard) -> None:
        """Merge the buffer of ``shard`` into its arrays (the cost grows with
        the shard, not the map); cut the shard in two if it grew too large."""
        keys = np.concatenate((shard.keys, np.frombuffer(shard.new_keys, dtype=np.uint64)))
        values = np.concatenate((shard.values, np.frombuffer(shard.new_values, dtype=np.uint64)))
        # Two sorted runs: the stable sort (timsort) merges them in linear time.
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        if len(keys) > self._SPLIT and shard.hi - shard.lo > 1:
            self._build(shard.lo, shard.hi, keys, values, depth=1)
            return
        shard.keys, shard.values = keys, values
        shard.key_view, shard.value_view = keys.data, values.data
        shard.limit = max(self._MIN_BUFFER, len(keys) >> self._BUFFER_SHIFT)
        shard.buffer = {}
        shard.new_keys, shard.new_values = array("Q"), array("Q")

    def _build(
        self, lo: int, hi: int, keys: np.ndarray, values: np.ndarray, depth: int = _SLOT_BITS
    ) -> None:
        """Install the sorted ``keys`` of slots ``lo`` to ``hi - 1`` as new
        shards: cut in halves while above ``_SPLIT`` entries, ``depth`` times
        at most."""
        if depth == 0 or hi - lo == 1 or len(keys) <= self._SPLIT:
            # A copy: a slice of a larger array would keep all of it alive.
            limit = max(self._MIN_BUFFER, len(keys) >> self._BUFFER_SHIFT)
            shard = _Shard(lo, hi, keys.copy(), values.copy(), limit)
            self._slots[lo:hi] = [shard] * (hi - lo)
            return
        mid = (lo + hi) >> 1
        cut = int(np.searchsorted(keys, np.uint64(mid << _SLOT_SHIFT)))
        self._build(lo, mid, keys[:cut], values[:cut], depth - 1)
        self._build(mid, hi, keys[cut:], values[cut:], depth - 1)
