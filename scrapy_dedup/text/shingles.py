"""Shingles of a text, hashed: what MinHash and SimHash fingerprints are made of.

Pure functions, no Scrapy import. Shingles are hashed with a vectorized numpy
hash, about 50 times faster than the recipe's pure-Python ``simhash`` on a
1000-word document.

Texts are compared after :func:`normalize_text`: Unicode compatibility
normalization (NFKC: composed and decomposed accents, fullwidth letters,
ligatures all become one form), lowercase, without the invisible format
characters that editors and CMSs sprinkle inside words (soft hyphen, zero-width
space, non-joiner and joiner, word joiner, byte-order mark), whitespace runs
collapsed. Accents, digits and punctuation are kept: ``résumé`` and ``resume``,
``1`` and ``7`` stay different. NFKC does fold superscripts and circled digits
to plain ones (``m²`` and ``m2``), a trade accepted for catching the fullwidth
and ligature variants.

Scripts written without spaces between words (Chinese, Japanese kana, Thai,
Lao, Khmer, Myanmar, Tibetan) make every character a token of its own, so
their shingles are character 3-grams, while space-separated languages keep word
3-shingles; a mixed text gets both. Character n-grams rather than a word
segmenter because they need no dependency or dictionary, work the same for
every one of these languages and for mixed text, and stay vectorized: a
segmenter (jieba, MeCab, PyThaiNLP) is a per-language model, 10-100 times
slower than hashing, and its output changes with its version, which would
change stored fingerprints. Korean (Hangul) is left to words: it puts spaces
between words, so word shingles already work there, and syllable 3-grams would
only make its fingerprints weaker and different from today's.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from scrapy_dedup.text._hashing import GOLDEN, mix64, mix64_array

__all__ = [
    "SHARED_MAX_CHARS",
    "NormalizedText",
    "has_more_tokens",
    "normalize_text",
    "normalize_text_chunks",
    "normalized_utf8",
    "normalized_utf8_chunks",
    "shingle_hashes",
]

# Odd multiplier of the polynomial hash (the golden-ratio constant), and its
# inverse modulo 2**64, so a substring's hash can be shifted back to position 0.
_BASE = GOLDEN
_BASE_INV = pow(_BASE, -1, 1 << 64)

# The class of each code point, after normalization: part of a word, whitespace
# as str.split() sees it (str.isspace), or a token of its own (a script written
# without spaces). Code points past the table are word characters: mode="clip"
# maps them to its last entry.
_WORD, _SPACE, _SOLO = 0, 1, 2
# Chinese (CJK ideographs, radicals, bopomofo, iteration marks), Japanese kana
# (halfwidth forms become fullwidth under NFKC), Thai, Lao, Tibetan, Myanmar,
# Khmer: whole blocks, marks and digits included, so a mark is a token of its own.
_SOLO_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x0F00, 0x0FFF),  # Tibetan
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK and Kangxi radicals
    (0x3005, 0x3007),  # iteration mark, closing mark, ideographic zero
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x31A0, 0x31FF),  # Bopomofo extended, CJK strokes, Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA9E0, 0xA9FF),  # Myanmar extended B
    (0xAA60, 0xAA7F),  # Myanmar extended A
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x1B000, 0x1B16F),  # Kana supplement and extensions
    (0x20000, 0x323AF),  # CJK extensions B-H
)


def _stable_ranges() -> list[tuple[int, int]]:
    """Ranges of the BMP characters that NFKC leaves alone and that are
    boundaries (starters that never compose with what precedes them, nor
    reorder around it), from the running Python's Unicode data. A character
    left out costs time, never a wrong result: it goes through NFKC."""
    ranges = [(0x00, 0x7F)]
    # Ideographs, Hangul syllables and private use are stable without a look.
    known = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xE000, 0xF8FF))
    # Hangul vowel and trailing jamo compose with the jamo before them, though
    # Unicode data shows them as plain letters: never stable.
    jamo = range(0x1160, 0x1200)
    pos = 0x80
    for lo, hi in (*known, (0x10000, 0x10000)):
        for code in range(pos, lo):
            if code in jamo:
                continue
            char = chr(code)
            if (
                unicodedata.combining(char) == 0
                and unicodedata.category(char) not in ("Mn", "Mc", "Me", "Cf", "Cn", "Cs")
                and unicodedata.is_normalized("NFKC", char)
            ):
                if ranges[-1][1] == code - 1:
                    ranges[-1] = (ranges[-1][0], code)
                else:
                    ranges.append((code, code))
        if lo < 0x10000:
            ranges.append((lo, hi))
        pos = hi + 1
    return ranges


_STABLE = _stable_ranges()
# Set on characters that NFKC may change or that may compose with the one
# before them (and on every character past the BMP): a text holding one after
# lowercasing goes through full normalization.
_UNSTABLE = 4
_CLASS = np.full(0x323B1, _UNSTABLE, dtype=np.uint8)
for _lo, _hi in _STABLE:
    _CLASS[_lo : _hi + 1] = _WORD
for _lo, _hi in _SOLO_RANGES:
    _CLASS[_lo : _hi + 1] |= _SOLO
_CLASS[[c for c in range(0x3001) if chr(c).isspace()]] = _SPACE  # none above U+3000

# Invisible format characters that carry no text: soft hyphen, zero-width space,
# zero-width non-joiner and joiner, word joiner, byte-order mark (zero-width
# no-break space). Dropped before NFKC, so a mark after one still composes.
_FORMAT = "\u00ad\u200b\u200c\u200d\u2060\ufeff"

# Where a text can be cut into pieces that normalize independently: before a
# character that never composes with or reorders around the one before it, is
# not cased and is not case-ignorable (so str.lower()'s final-sigma rule sees
# the same context on both sides) and ends any token: whitespace, or a letter of
# a script without spaces (base letters only, never marks).
_TOKEN_CUT = (
    r"\s|[\u0e01-\u0e30\u0e81-\u0eb0\u0f40-\u0f6c\u1000-\u102a\u1780-\u17b3"
    r"\u3041-\u3096\u30a1-\u30fa\u3400-\u4dbf\u4e00-\u9fff]"
)
_TOKEN_CUT_RE = re.compile(_TOKEN_CUT)
# The digest may also cut inside a word: before a Hangul syllable, or between
# two ASCII letters or digits (so a 50 MB text without spaces still streams).
_CUT_RE = re.compile(_TOKEN_CUT + r"|[\uac00-\ud7a3]|(?<=[0-9A-Za-z])[0-9A-Za-z]")

#: Characters per piece when a long text is normalized or hashed piecewise.
CHUNK_CHARS = 1 << 20

# P**i and P**-i modulo 2**64 for i < len; grown (doubled) on demand.
_powers = np.ones(0, dtype=np.uint64)
_inv_powers = np.ones(0, dtype=np.uint64)


_CACHED_POWERS = 1 << 21  # longer texts get tables of their own, not kept afterwards


def _make_powers(size: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    # cumprod wraps modulo 2**64 (numpy array arithmetic never checks overflow).
    base = np.full(size, _BASE, dtype=np.uint64)
    base[0] = 1
    inv = np.full(size, _BASE_INV, dtype=np.uint64)
    inv[0] = 1
    return np.cumprod(base, dtype=np.uint64), np.cumprod(inv, dtype=np.uint64)


def _powers_for(n: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    global _powers, _inv_powers
    if n <= len(_powers):
        return _powers, _inv_powers
    if n > _CACHED_POWERS:
        return _make_powers(n)
    _powers, _inv_powers = _make_powers(min(max(n, 2 * len(_powers), 1 << 16), _CACHED_POWERS))
    return _powers, _inv_powers


def _lane(i: int) -> np.uint64:
    """The odd multiplier K[i] of the i-th word of a shingle."""
    return _LANES[i] if i < len(_LANES) else np.uint64(mix64(i + 1) | 1)


_LANES: list[np.uint64] = [np.uint64(mix64(i + 1) | 1) for i in range(16)]


# Characters NFKC may change, or that may compose with the one before them.
_UNSTABLE_RE = re.compile(
    "[^"
    + "".join(
        re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
        for lo, hi in _STABLE
    )
    + "]+"
)


def _nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, faster: normalize() redoes the
    whole text as soon as one character needs it (an ellipsis in an English
    page), this only the stretches that need it, each with the character
    before it (a mark composes with it)."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    parts, pos = [], 0
    for match in _UNSTABLE_RE.finditer(text):
        start = max(match.start() - 1, pos)
        parts.append(text[pos:start])
        parts.append(unicodedata.normalize("NFKC", text[start : match.end()]))
        pos = match.end()
    parts.append(text[pos:])
    return "".join(parts)


def _normalize_chars(text: str) -> str:
    """NFKC, lowercase, without format characters; whitespace left as it is."""
    if text.isascii():
        return text.lower()  # ASCII is its own NFKC and has no format characters
    if "\u2026" in text:
        text = text.replace("\u2026", "...")  # see _normalized_codes: saves _nfkc's search
    for char in _FORMAT:
        if char in text:
            text = text.replace(char, "")
    # NFKC then lowercase: the result is stable under both again (checked for
    # every code point), so normalizing twice changes nothing. Except that "İ"
    # lowercases to "i" and a combining dot, which may have to move before a
    # mark that follows it.
    text = _nfkc(text).lower()
    return _nfkc(text) if "\u0307" in text else text


def normalize_text(text: str) -> str:
    """*text* as it is compared: NFKC-normalized, lowercase, without invisible
    format characters, every whitespace run collapsed to one space.

    Texts that differ only in case, layout, Unicode composition, fullwidth forms
    or zero-width characters get the same digest and the same shingles.

    >>> normalize_text("  Hello,\\n\\tWORLD  again ")
    'hello, world again'
    >>> normalize_text("Cafe\\u0301 \\uff21\\uff22\\uff23 in\\u00advis\\u200bible")
    'café abc invisible'
    >>> normalize_text(" \\n ")
    ''
    """
    return " ".join(_normalize_chars(text).split())


def _cuts(text: str, size: int, cut: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of consecutive pieces of *text*, each about *size*
    characters long and ending where *cut* allows (a piece runs on until it
    does, so a text with no cut at all is one piece)."""
    start, n = 0, len(text)
    while start < n:
        end = start + size
        if end >= n:
            end = n
        else:
            match = cut.search(text, end)
            end = match.start() if match else n
        yield start, end
        start = end


def normalize_text_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """:func:`normalize_text` of *text* in pieces of about *size* characters:
    joined, they are exactly ``normalize_text(text)``, without ever holding
    more than one piece's words (a 50 MB text in bounded memory).

    Pieces are cut only where normalization cannot see across the cut (before
    whitespace, before a CJK or Thai letter, or between two ASCII letters or
    digits), never between a letter and its combining marks.

    >>> "".join(normalize_text_chunks("Cafe\\u0301  AU  LAIT", size=2))
    'café au lait'
    """
    # The digest's own pieces: each is whole characters, so each decodes alone.
    for piece in normalized_utf8_chunks(text, size):
        yield piece.decode("utf-8", "surrogatepass")


def _classify(text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """The code points of *text* and their classes (:data:`_CLASS`)."""
    if text.isascii():
        encoded = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    else:
        encoded = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    codes = encoded.astype(np.int64)
    return codes, _CLASS.take(codes, mode="clip")


# A code point past _CLASS, whose class is the last entry's: unstable.
_ASIDE = len(_CLASS) - 1
# _RAW_FLAGS: 1 unstable before or after lowercasing, 2 lowercased in context.
_CONTEXT = 2


def _lower_tables() -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint8]]:
    """``ord(chr(c).lower())`` for every BMP code point, so a text is lowercased
    with one numpy ``take`` (``str.lower`` costs 3-6 ns a character once a
    text holds one past Latin-1, as a curly quote makes an English page do),
    and each code point's flag: 1 when unstable before or after lowercasing,
    :data:`_CONTEXT` when lowercased in context, else 0.

    A code point whose lowercase depends on the letters around it (capital
    sigma: final or not) or is two characters (dotted capital I), and the entry
    past the BMP that ``mode="clip"`` gives every other plane, lowercase to
    :data:`_ASIDE`, an unstable class: they are never taken as they are."""
    lower = np.empty(0x10001, dtype=np.uint32)
    lower[:0x10000] = [
        ord(lowered) if len(lowered := chr(c).lower()) == 1 else _ASIDE for c in range(0x10000)
    ]
    lower[[0x3A3, 0x10000]] = _ASIDE
    flags = ((_CLASS[:0x10001] | _CLASS.take(lower)) >= _UNSTABLE).view(np.uint8)
    flags[[0x3A3, 0x130]] = _CONTEXT
    return lower, flags


assert _CLASS[_ASIDE] == _UNSTABLE
_LOWER, _RAW_FLAGS = _lower_tables()
# Both at once: the lowercase code point, and its class in the top byte (one
# take instead of two; the classes are then a strided view of that byte).
_LOWER_CLASS = _LOWER | (_CLASS.take(_LOWER).astype(np.uint32) << 24)
_CODE_MASK, _CLASS_SHIFT = (1 << 24) - 1, 24
_CLASS_BYTE = 3 if sys.byteorder == "little" else 0
# More stretches than this to normalize one by one: normalize the whole text.
_MAX_STRETCHES = 64
# ASCII whitespace (as str.isspace sees it) to " ", ASCII letters to lowercase.
_ASCII_FOLD = bytes(
    32 if chr(c).isspace() and c < 0x80 else ord(chr(c).lower()) if c < 0x80 else c
    for c in range(256)
)
# ASCII whitespace to 0, any other ASCII character to its lowercase + 1.
_ASCII_PLUS_ONE = bytes(
    0 if chr(c).isspace() else ord(chr(c).lower()) + 1 if c < 0x80 else 0 for c in range(256)
)


def _normalized_codes(text: str) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]:
    """The code points of :func:`_normalize_chars` of *text* (uint8 for ASCII,
    read-only; else a fresh array of uint32 or int64) and their classes (:data:`_WORD`,
    :data:`_SPACE` or :data:`_SOLO`), except that a whitespace character may be
    left as another one (a space is a space, whichever).

    Lowercased with :data:`_LOWER` (:data:`_LOWER_CLASS`). When that leaves only stable characters
    (the common case), NFKC would change nothing but whitespace (checked for
    every code point). Otherwise only the stretches of characters unstable
    before or after lowercasing go through :func:`_normalize_chars`, each with
    the character before it, as :func:`_nfkc` does: a character stable both ways
    is a boundary of both, and lowercasing is one character at a time but for
    a capital sigma (final or not, by the letters around it) and a dotted
    capital I (two characters). With one of those, or with many stretches,
    the whole text does."""
    if text.isascii():
        spaced = text.encode("ascii").translate(_ASCII_FOLD)
        encoded = np.frombuffer(spaced, dtype=np.uint8)  # read-only
        return encoded, (encoded == 32).view(np.uint8)
    if "\u2026" in text:
        # The one unstable character common in English: "\u2026" is "..." under
        # NFKC (before lowercasing, so even a capital sigma sees "..."), and it
        # neither composes nor reorders with its neighbours: replaced at once.
        text = text.replace("\u2026", "...")
    raw = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    both = _LOWER_CLASS.take(raw, mode="clip")
    codes = both & _CODE_MASK
    kind = both.view(np.uint8)[_CLASS_BYTE::4].copy()  # contiguous: 3x faster to use
    if int(both.max()) < _UNSTABLE << _CLASS_SHIFT:
        return codes, kind
    flags = _RAW_FLAGS.take(raw, mode="clip")
    if int(flags.max()) >= _CONTEXT:
        return _exact_codes(text)
    positions = flags.view(np.bool_).nonzero()[0]  # 0 or 1: nonzero of bools is 15x faster
    if len(positions) > 8 * _MAX_STRETCHES:
        return _exact_codes(text)
    # Runs of consecutive unstable positions, [first, last].
    runs: list[list[int]] = []
    for position in positions.tolist():
        if runs and runs[-1][1] == position - 1:
            runs[-1][1] = position
        else:
            runs.append([position, position])
    if len(runs) > _MAX_STRETCHES:
        return _exact_codes(text)
    code_parts: list[npt.NDArray[Any]] = []
    kind_parts: list[npt.NDArray[np.uint8]] = []
    pos = 0
    for first, last in runs:
        start = max(first - 1, pos)  # a mark composes with the character before it
        piece_codes, piece_kind = _stretch_codes(text[start : last + 1])
        code_parts += (codes[pos:start], piece_codes)
        kind_parts += (kind[pos:start], piece_kind)
        pos = last + 1
    code_parts.append(codes[pos:])
    kind_parts.append(kind[pos:])
    return np.concatenate(code_parts), np.concatenate(kind_parts)


def _exact_codes(text: str) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]:
    """:func:`_normalized_codes` the plain way: :func:`_normalize_chars`, then classes."""
    codes, kind = _classify(_normalize_chars(text))
    kind &= _SPACE | _SOLO
    return codes.astype(np.uint32), kind


@lru_cache(maxsize=4096)
def _short_stretch_codes(text: str) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]:
    codes, kind = _exact_codes(text)
    codes.flags.writeable = kind.flags.writeable = False
    return codes, kind


def _stretch_codes(text: str) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]:
    """:func:`_exact_codes` of a stretch: short ones ("d…", "e\u0301") recur, so
    they are cached (read-only; the caller concatenates them)."""
    return _short_stretch_codes(text) if len(text) <= 8 else _exact_codes(text)


def _token_hashes(text: str) -> npt.NDArray[np.uint64]:
    """The hash of each token of :func:`normalize_text` of *text*, in order."""
    n = len(text)
    if n > 2 * _EDGE_CHARS and not text.isascii() and not text[:1].isascii():
        # MinHashMethod.fingerprint pads a text with two marker words at each
        # end: an ASCII text between them still takes the ASCII path (3-4x
        # cheaper to classify). Whitespace separates tokens whatever is around
        # it, so the tokens are those of the parts. The two words are looked
        # for at the ends only: a text that is not so costs nearly nothing.
        head = text[:_EDGE_CHARS].split(maxsplit=2)
        tail = text[-_EDGE_CHARS:].rsplit(maxsplit=2)
        if len(head) == 3 and len(tail) == 3:
            body = text[_EDGE_CHARS - len(head[2]) : n - _EDGE_CHARS + len(tail[0])]
            if body.isascii():
                return np.concatenate(
                    (
                        _word_token_hashes(head[0]),
                        _word_token_hashes(head[1]),
                        _plain_token_hashes(body),
                        _word_token_hashes(tail[1]),
                        _word_token_hashes(tail[2]),
                    )
                )
    return _plain_token_hashes(text)


# How far from each end the two words of a padded text are looked for.
_EDGE_CHARS = 32


@lru_cache(maxsize=256)
def _word_token_hashes(word: str) -> npt.NDArray[np.uint64]:
    hashes = _plain_token_hashes(word)
    hashes.flags.writeable = False
    return hashes


_Codes = tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]


def _plain_token_hashes(text: str, normalized: _Codes | None = None) -> npt.NDArray[np.uint64]:
    """The token hashes of *text* in one piece; *normalized*: its
    :func:`_normalized_codes` (of a text not ASCII), if already known."""
    inside: npt.NDArray[np.bool_]
    if normalized is None and text.isascii():
        # c + 1 of each lowercased character, 0 for whitespace: one C pass.
        plus_one = np.frombuffer(text.encode("ascii").translate(_ASCII_PLUS_ONE), np.uint8)
        n = len(plus_one)
        inside = np.zeros(n + 2, dtype=np.bool_)
        np.not_equal(plus_one, 0, out=inside[1:-1])
        solo = False
    else:
        codes, kind = _normalized_codes(text) if normalized is None else normalized
        n = len(codes)
        inside = np.zeros(n + 2, dtype=np.bool_)
        np.not_equal(kind, _SPACE, out=inside[1:-1])
        solo = int(kind.max(initial=0)) == _SOLO
    if solo:
        # A token starts at a non-space character after a space, a solo
        # character or the start, or at a solo character; it ends likewise.
        cut = np.ones(n + 1, dtype=np.bool_)
        np.logical_or(kind[:-1] != _WORD, kind[1:] != _WORD, out=cut[1:-1])
        starts = np.flatnonzero(cut[:-1] & inside[1:-1])
        ends = np.flatnonzero(cut[1:] & inside[1:-1])
        ends += 1
    else:
        # Words start where a non-space follows a space (or the start) and end
        # where a space follows a non-space (or the end).
        edges = np.flatnonzero(inside[1:] != inside[:-1])
        starts, ends = edges[0::2], edges[1::2]
    if not len(starts):
        return np.empty(0, dtype=np.uint64)
    powers, inv_powers = _powers_for(n)
    # prefix[k] = sum over j < k of (c[j] + 1) * P**j; a token's polynomial is
    # the difference of two prefixes, shifted back to position 0 by P**-start.
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    weighted = prefix[1:]
    if normalized is None and text.isascii():
        np.multiply(plus_one, powers[:n], out=weighted)
    else:
        np.add(codes, 1, out=weighted, casting="unsafe")
        weighted *= powers[:n]
    np.cumsum(weighted, out=weighted)
    hashes = prefix[ends]
    hashes -= prefix[starts]
    hashes *= inv_powers[starts]
    return mix64_array(hashes)


# Below this many characters, a piece is collapsed by split() and join():
# numpy's fixed cost (~6 us a piece) is more than theirs (~7 ns a character).
_NUMPY_MIN_CHARS = 1024


def _collapsed_utf8(
    piece: str, normalized: _Codes | None = None
) -> tuple[bytes, bool, bool] | None:
    """``(words of normalize_text(piece) as UTF-8, whether the normalized piece
    starts with whitespace, whether it ends with it)``; ``None`` when it has no
    word (``b""`` when it is only whitespace). *normalized*: the
    :func:`_normalized_codes` of a piece not ASCII of at least
    :data:`_NUMPY_MIN_CHARS` characters, if already known (its whitespace
    code points become 32: still whitespace to the tokens)."""
    if normalized is None and len(piece) < _NUMPY_MIN_CHARS:
        chars = _normalize_chars(piece)
        words = chars.split()
        if not words:
            return (b"", False, False) if chars else None
        joined = " ".join(words).encode("utf-8", "surrogatepass")
        return joined, chars[0].isspace(), chars[-1].isspace()
    plain = normalized is None and piece.isascii()
    if plain:  # bytes all along
        codes = np.frombuffer(piece.encode().translate(_ASCII_FOLD), np.uint8)
        space = codes == 32
    else:
        codes, kind = _normalized_codes(piece) if normalized is None else normalized
        space = kind == _SPACE
        np.putmask(codes, space, 32)
    words = ~space
    if not words.any():
        return (b"", False, False) if len(space) else None
    # Words, and the first space after each; then no trailing space.
    keep = words.copy()
    keep[1:] |= words[:-1]
    kept = codes[keep]
    if kept[-1] == 32:
        kept = kept[:-1]
    if plain:
        return kept.tobytes(), bool(space[0]), bool(space[-1])
    chars = kept.astype("<u4", copy=False).tobytes().decode("utf-32-le", "surrogatepass")
    return chars.encode("utf-8", "surrogatepass"), bool(space[0]), bool(space[-1])


def normalized_utf8(text: str) -> bytes:
    """:func:`normalize_text` of *text*, UTF-8 encoded (lone surrogates passed
    through), in one piece: for a text of at most :data:`CHUNK_CHARS`
    characters, else see :func:`normalized_utf8_chunks`.

    >>> normalized_utf8(" Caf\\u00e9\\u2026  AU\\u200b LAIT ").decode()
    'café... au lait'
    """
    if len(text) < _NUMPY_MIN_CHARS and text.isascii():  # a title, a short listing
        return " ".join(text.lower().split()).encode()
    collapsed = _collapsed_utf8(text)
    return b"" if collapsed is None else collapsed[0]


def normalized_utf8_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[bytes]:
    """:func:`normalize_text_chunks` of *text*, UTF-8 encoded (lone surrogates
    passed through): what :func:`~scrapy_dedup.text.clean.content_digest`
    hashes. Whitespace of a long piece is collapsed in numpy rather than by
    ``split()`` and ``join()`` of every word.

    >>> b"".join(normalized_utf8_chunks("Cafe\\u0301  AU  LAIT", size=2)).decode()
    'café au lait'
    """
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    emitted = pending = False  # pending: whitespace since the last words
    for start, end in _cuts(text, size, _CUT_RE):
        collapsed = _collapsed_utf8(text[start:end])
        if collapsed is None:
            continue
        words, leading, trailing = collapsed
        if not words:  # whitespace only
            pending = True
            continue
        if emitted and (pending or leading):
            yield b" "
        yield words
        emitted, pending = True, trailing


def has_more_tokens(text: str, count: int) -> bool:
    """Whether *text* has more than *count* tokens as :func:`shingle_hashes`
    sees them: words, and characters of scripts written without spaces.

    >>> has_more_tokens("two words", 2), has_more_tokens("三个字", 2)
    (False, True)
    """
    if len(text.split(maxsplit=count)) > count:
        return True  # enough words already (the common case, and the cheap one)
    if text.isascii():
        return False
    return len(_token_hashes(text)) > count


def shingle_hashes(text: str, size: int = 3) -> npt.NDArray[np.uint64]:
    """Return stable 64-bit hashes of the *size*-shingles of the tokens of *text*.

    Tokens are the whitespace-separated words of :func:`normalize_text`, except
    that each character of a script written without spaces (Chinese, Japanese
    kana, Thai, Lao, Khmer, Myanmar, Tibetan) is a token of its own: shingles
    are word 3-grams in English and character 3-grams in Chinese. Shingle ``i``
    is tokens ``i .. i+size-1``, in text order, duplicates kept. A text with
    fewer than *size* tokens gives one shingle of all its tokens; an empty text
    gives an empty array. Long texts are hashed in pieces, so the memory beyond
    the result stays bounded.

    The hash of a token with code points ``c[0..m)`` is
    ``mix(sum((c[j] + 1) * P**j))`` and the hash of a shingle of tokens
    ``w[0..k)`` is ``mix(sum(K[i] * hash(w[i])))``, all modulo 2**64, where
    ``mix`` is the splitmix64 finalizer, ``P = 0x9E3779B97F4A7C15`` and
    ``K[i] = mix(i + 1) | 1``. It depends only on the tokens, so it is the same
    in every process and on every machine (unlike Python's ``hash()``). It is
    not bit-compatible with the recipe's md5-based hash, and it is not meant to
    resist deliberately crafted collisions.

    >>> shingle_hashes("The quick brown fox").tolist() == (
    ...     shingle_hashes("the QUICK brown").tolist() + shingle_hashes("quick brown fox").tolist()
    ... )
    True
    >>> len(shingle_hashes("two words")), len(shingle_hashes(" \\n "))
    (1, 0)
    >>> len(shingle_hashes("中文文本"))  # 4 characters: 2 shingles
    2
    """
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    return _shingles_of_tokens(_token_hashes_long(text), size)


def _shingles_of_tokens(token_hashes: npt.NDArray[np.uint64], size: int) -> npt.NDArray[np.uint64]:
    """The *size*-shingle hashes of a text whose token hashes are *token_hashes*."""
    tokens = len(token_hashes)
    if not tokens:
        return np.empty(0, dtype=np.uint64)
    count = max(tokens - size + 1, 1)
    width = min(size, tokens)
    hashes: npt.NDArray[np.uint64] = token_hashes[:count] * _LANES[0]
    for i in range(1, width):
        hashes += token_hashes[i : i + count] * _lane(i)
    return mix64_array(hashes)


#: Longest text :class:`NormalizedText` normalizes once for both the digest and
#: the shingles; a longer one is normalized by each in pieces, as on its own.
SHARED_MAX_CHARS = 1 << 16
# Every byte but the ASCII ones: deleted, to see which other characters a text has.
_ASCII_BYTES = bytes(range(0x80))
# More distinct non-ASCII characters than this, or more than a sixth of the
# UTF-8 bytes in them (Greek, Russian, Chinese prose): the numpy path, whose
# cost does not grow with them (up to 3x cheaper there; the fold is 1.1-1.3x
# cheaper on English, French or German with a few such characters).
_MAX_FOLDED_CHARS = 16


@lru_cache(maxsize=4096)
def _folded_char(char: str) -> bytes | None:
    """What the UTF-8 of a non-ASCII *char* becomes in the normalized text,
    when that needs no look at its neighbours: its UTF-8 itself, its
    lowercase's, ``b" "`` for whitespace, ``b""`` for a format character.
    ``None`` otherwise (NFKC changes it or may compose it with what precedes,
    its lowercase depends on context, a token of its own, past the BMP)."""
    if char in _FORMAT:
        return b""
    code = ord(char)
    if code >= 0x10000 or _RAW_FLAGS[code]:
        return None
    lower = int(_LOWER[code])
    kind = int(_CLASS[lower])
    if kind == _SPACE:
        return b" "
    if kind != _WORD:
        return None
    return chr(lower).encode("utf-8")


class NormalizedText:
    """*text* normalized once (:func:`normalize_text`), for the exact digest
    and the shingles alike: :meth:`utf8` is exactly :func:`normalized_utf8`
    and :meth:`token_hashes` exactly the token hashes :func:`shingle_hashes`
    combines, each computed on first use.

    ASCII text, and text whose other characters each normalize alone (Latin-1
    letters, curly quotes, dashes, middle dot, no-break and other spaces, soft
    hyphen and zero-width characters, ellipsis), is folded as UTF-8 bytes: ASCII
    through one ``bytes.translate``, each distinct other character by one
    ``bytes.replace``. Other text of :data:`_NUMPY_MIN_CHARS` characters or
    more shares one :func:`_normalized_codes` (numpy); a shorter one, or one
    longer than :data:`SHARED_MAX_CHARS`, is normalized by each as on its own.

    >>> n = NormalizedText("Caf\u00c9 \u201cAU\u00a0LAIT\u201d\u2026")
    >>> n.utf8() == normalized_utf8(n.text) == "café “au lait”...".encode()
    True
    >>> n.shingle_hashes().tolist() == shingle_hashes(n.text).tolist()
    True
    """

    __slots__ = ("_codes", "_folded", "_inside", "_tokens", "_utf8", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._folded: bytes | bool | None = False  # False: not folded yet
        self._inside: npt.NDArray[np.bool_] | None = None
        self._codes: _Codes | None = None
        self._utf8: bytes | None = None
        self._tokens: npt.NDArray[np.uint64] | None = None

    def folded(self) -> bytes | None:
        """The UTF-8 of the text's characters normalized, every whitespace
        character as ``b" "`` (runs not collapsed); ``None`` when the text
        takes the general path."""
        if self._folded is False:
            self._folded = _fold_utf8(self.text) if len(self.text) <= SHARED_MAX_CHARS else None
        return self._folded  # type: ignore[return-value]

    def utf8(self) -> bytes:
        """:func:`normalized_utf8` of the text (for a text of at most
        :data:`SHARED_MAX_CHARS` characters: a longer one's digest is taken piece by piece)."""
        if self._utf8 is None:
            folded = self.folded()
            if folded is None:
                if self._shares_codes():
                    collapsed = _collapsed_utf8(self.text, self._normalized_codes())
                    self._utf8 = b"" if collapsed is None else collapsed[0]
                else:
                    self._utf8 = normalized_utf8(self.text)
            elif len(folded) < _NUMPY_MIN_CHARS:
                self._utf8 = b" ".join(folded.split())  # every whitespace is b" " by now
            else:
                inside = self._folded_inside(folded)
                if not inside.any():
                    self._utf8 = b""
                else:
                    # Words, and the first space after each.
                    keep = inside[1:-1] | inside[:-2]
                    kept = np.frombuffer(folded, dtype=np.uint8)[keep]
                    self._utf8 = kept[:-1].tobytes() if kept[-1] == 32 else kept.tobytes()
        return self._utf8

    def _shares_codes(self) -> bool:
        """Whether the digest and the tokens of a text that takes the general
        path share its :func:`_normalized_codes` (the digest of a shorter
        one, or a longer one, is taken otherwise)."""
        return _NUMPY_MIN_CHARS <= len(self.text) <= SHARED_MAX_CHARS

    def _normalized_codes(self) -> _Codes:
        if self._codes is None:
            self._codes = _normalized_codes(self.text)
        return self._codes

    def _folded_inside(self, folded: bytes) -> npt.NDArray[np.bool_]:
        """Whether each byte of *folded* is in a word, with a ``False`` before
        and after them all (the digest's and the ASCII tokens' mask alike)."""
        if self._inside is None:
            self._inside = _inside_words(np.frombuffer(folded, dtype=np.uint8))
        return self._inside

    def token_hashes(self) -> npt.NDArray[np.uint64]:
        """The hash of each token of the normalized text, in order (read-only)."""
        if self._tokens is None:
            folded = self.folded()
            if folded is None:
                if self._shares_codes():
                    tokens = _plain_token_hashes(self.text, self._normalized_codes())
                else:
                    tokens = _token_hashes_long(self.text)
            elif folded.isascii():
                codes = np.frombuffer(folded, dtype=np.uint8)
                tokens = _folded_token_hashes(codes, self._folded_inside(folded))
            else:  # the code points, not the UTF-8 bytes, are hashed
                chars = folded.decode("utf-8").encode("utf-32-le")
                codes = np.frombuffer(chars, dtype="<u4")
                tokens = _folded_token_hashes(codes, _inside_words(codes))
            tokens.flags.writeable = False
            self._tokens = tokens
        return self._tokens

    def shingle_hashes(
        self, size: int = 3, *, pad: tuple[str, str] | None = None
    ) -> npt.NDArray[np.uint64]:
        """:func:`shingle_hashes` of the text, or of ``f"{pad[0]} {text} {pad[1]}"``
        when *pad* is given (words of a few characters each, such as the
        marker words of :class:`~scrapy_dedup.text.near.MinHashMethod`)."""
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        tokens = self.token_hashes()
        if pad is not None:
            # Whitespace separates tokens whatever is around it: the padded
            # text's tokens are those of the parts.
            tokens = np.concatenate(
                [_word_token_hashes(w) for w in pad[0].split()]
                + [tokens]
                + [_word_token_hashes(w) for w in pad[1].split()]
            )
        return _shingles_of_tokens(tokens, size)

    def has_more_tokens(self, count: int) -> bool:
        """:func:`has_more_tokens` of the text, from the tokens when they are needed."""
        if len(self.text.split(maxsplit=count)) > count:
            return True
        if self.text.isascii():
            return False
        return len(self.token_hashes()) > count


def _token_hashes_long(text: str) -> npt.NDArray[np.uint64]:
    """:func:`shingle_hashes`'s token hashes of *text*, piece by piece when it is long."""
    if len(text) <= CHUNK_CHARS:
        return _token_hashes(text)
    parts = [
        _token_hashes(text[start:end]) for start, end in _cuts(text, CHUNK_CHARS, _TOKEN_CUT_RE)
    ]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def _fold_utf8(text: str) -> bytes | None:
    """The UTF-8 of :func:`_normalize_chars` of *text* with every whitespace
    character as ``b" "``, when each character normalizes alone
    (:func:`_folded_char`); else ``None``."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_FOLD)
    if "\u2026" in text:  # "..." under NFKC, whatever is around it (see _normalized_codes)
        text = text.replace("\u2026", "...")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if 12 * (len(raw) - len(text)) > len(raw):  # surely dense (each adds 1-3 bytes)
        return None
    # The other characters, each distinct one taken out in turn (a set() of
    # them all costs 20 ns a character: an "é" on every line of French).
    others = raw.translate(None, _ASCII_BYTES)
    if 6 * len(others) > len(raw):
        return None
    folded = raw.translate(_ASCII_FOLD)  # UTF-8 bytes of other characters are >= 0x80
    for _ in range(_MAX_FOLDED_CHARS):
        if not others:
            return folded
        lead = others[0]
        own = others[: 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4]
        into = _folded_char(own.decode("utf-8"))
        if into is None:
            return None
        if into != own:  # UTF-8 is self-synchronizing: no other character holds these bytes
            folded = folded.replace(own, into)
        others = others.replace(own, b"")
    return None if others else folded


def _inside_words(codes: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """``codes != 32`` with a ``False`` before and after."""
    inside = np.zeros(len(codes) + 2, dtype=np.bool_)
    np.not_equal(codes, 32, out=inside[1:-1])
    return inside


def _folded_token_hashes(
    codes: npt.NDArray[Any], inside: npt.NDArray[np.bool_]
) -> npt.NDArray[np.uint64]:
    """The token hashes of a normalized text given as its code points, every
    whitespace a space (32), no token of a script without spaces; *inside*:
    its :func:`_inside_words`."""
    n = len(codes)
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    starts, ends = edges[0::2], edges[1::2]
    if not len(starts):
        return np.empty(0, dtype=np.uint64)
    powers, inv_powers = _powers_for(n)
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    weighted = prefix[1:]
    # (The spaces' terms cancel out: a token's hash is a difference of prefixes within it.)
    np.add(codes, 1, out=weighted, dtype=np.uint64, casting="unsafe")
    weighted *= powers[:n]
    np.cumsum(weighted, out=weighted)
    hashes = prefix[ends]
    hashes -= prefix[starts]
    hashes *= inv_powers[starts]
    return mix64_array(hashes)
