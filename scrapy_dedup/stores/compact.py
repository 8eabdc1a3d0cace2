"""CompactMap: a uint64 -> uint64 map in about 16-30 bytes an entry. No Scrapy import."""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

__all__ = ["CompactMap"]


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
