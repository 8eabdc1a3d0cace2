"""The 64-bit mixing every hash of the text stage shares (splitmix64). No Scrapy import."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["GOLDEN", "MASK64", "mix64", "mix64_array", "splitmix64"]

MASK64 = (1 << 64) - 1
#: 2**64 / the golden ratio, odd: splitmix64's increment and a good multiplier.
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    """splitmix64's finalizer: a bijection of 64-bit integers with full avalanche.

    >>> mix64(0), mix64(1) != mix64(2)
    (0, True)
    """
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def mix64_array(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """:func:`mix64` of every value of a uint64 array, in place (and returned)."""
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def splitmix64(state: int, count: int) -> list[int]:
    """``count`` values of the splitmix64 sequence seeded with ``state``: plain
    integer arithmetic, so the values never change with a numpy release."""
    out = []
    for _ in range(count):
        state = (state + GOLDEN) & MASK64
        out.append(mix64(state))
    return out
