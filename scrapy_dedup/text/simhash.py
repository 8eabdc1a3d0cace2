"""SimHash fingerprints of text, for near-duplicate detection.

Pure functions, no Scrapy import. A document's fingerprint is the 64-bit
SimHash (Charikar, STOC 2002) of its word 3-shingles; two documents whose
fingerprints differ in only a few bits (:func:`hamming`) are near-duplicates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scrapy_dedup.text.shingles import shingle_hashes

__all__ = ["hamming", "simhash", "simhash_from_hashes"]

_COUNT_CHUNK = 1 << 16


def _count_bits(hashes: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Return, for each bit position b (least significant first), how many of
    *hashes* have bit b set."""
    if len(hashes) > _COUNT_CHUNK:  # bounded memory: 64 bytes per hash while unpacked
        return sum(
            (
                _count_bits(hashes[i : i + _COUNT_CHUNK])
                for i in range(0, len(hashes), _COUNT_CHUNK)
            ),
            np.zeros(64, dtype=np.int64),
        )
    count = len(hashes)
    # Pad to a multiple of 128 with zeros (which set no bit), then unpack each hash
    # to 64 bytes of 0/1 seen as 8 uint64 words, and add halves together 7 times:
    # every byte of every word then holds a count <= 128, without overflow.
    rows = -(-count // 128) * 128
    padded = np.zeros(rows, dtype="<u8")
    padded[:count] = hashes
    words = np.unpackbits(padded.view(np.uint8), bitorder="little").view(np.uint64)
    for _ in range(7):
        half = len(words) // 2
        words = words[:half] + words[half:]
    counts: npt.NDArray[np.int64] = (
        words.view(np.uint8).reshape(-1, 64).sum(axis=0, dtype=np.int64)
    )
    return counts


def simhash_from_hashes(hashes: npt.NDArray[np.uint64]) -> int:
    """Return the 64-bit SimHash of a set of 64-bit feature hashes, each weighted 1.

    Bit ``b`` of the result is set when more than half of *hashes* have bit ``b``
    set (a tie gives 0, as in the recipe). No hashes gives 0.

    >>> import numpy as np
    >>> bin(simhash_from_hashes(np.array([0b1100, 0b1010, 0b0110], dtype=np.uint64)))
    '0b1110'
    >>> simhash_from_hashes(np.array([0b01, 0b10], dtype=np.uint64))
    0
    """
    count = len(hashes)
    if not count:
        return 0
    majority = np.packbits(_count_bits(hashes) * 2 > count, bitorder="little")
    return int.from_bytes(majority.tobytes(), "little")


def simhash(text: str) -> int:
    """Return the 64-bit SimHash of the word 3-shingles of *text*.

    Each shingle counts once per occurrence, as in the recipe. Texts differing
    only in case or whitespace get the same fingerprint; an empty text gets 0.

    >>> simhash("The quick brown fox jumps") == simhash("the  QUICK\\nbrown fox jumps")
    True
    >>> simhash("")
    0
    >>> hamming(simhash("a b c d e f g h"), simhash("a b c d e f g x")) <= 32
    True
    """
    return simhash_from_hashes(shingle_hashes(text, 3))


def hamming(a: int, b: int) -> int:
    """Return the number of bits in which fingerprints *a* and *b* differ.

    >>> hamming(0b1011, 0b0001)
    2
    >>> hamming(5, 5)
    0
    """
    return (a ^ b).bit_count()
