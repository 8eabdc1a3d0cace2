# ruff: noqa: RUF001  (lookalike characters are what these tests are about)
"""One normalization for the digest and the shingles (issue 25): a
:class:`NormalizedText` gives exactly the digest, shingles and token checks
that each function computes from the text on its own, so digests and
fingerprints stored by earlier runs keep comparing."""

from __future__ import annotations

import random
import unicodedata

import pytest

from scrapy_dedup.text.clean import content_digest
from scrapy_dedup.text.near import MinHashMethod, SimhashMethod
from scrapy_dedup.text.shingles import (
    SHARED_MAX_CHARS,
    NormalizedText,
    _folded_char,
    has_more_tokens,
    normalized_utf8,
    shingle_hashes,
)
from tests.text import multilingual_corpus, neardup_corpus

MINHASH = MinHashMethod()
SIMHASH = SimhashMethod()


def assert_same(text: str) -> None:
    """Every output of the shared path equals the one of the separate path."""
    normalized = NormalizedText(text)
    assert content_digest(normalized) == content_digest(text), repr(text[:80])
    if len(text) <= SHARED_MAX_CHARS:
        assert normalized.utf8() == normalized_utf8(text), repr(text[:80])
    assert normalized.shingle_hashes().tolist() == shingle_hashes(text).tolist(), repr(text[:80])
    assert normalized.shingle_hashes(2).tolist() == shingle_hashes(text, 2).tolist()
    padded = MINHASH.shingles_of(NormalizedText(text))  # shingles before the digest too
    assert padded.tolist() == MINHASH.shingles(text).tolist(), repr(text[:80])
    assert MINHASH.fingerprint_of(normalized) == MINHASH.fingerprint(text)
    assert SIMHASH.fingerprint_of(normalized) == SIMHASH.fingerprint(text)
    for count in (0, 1, 3, 10):
        assert normalized.has_more_tokens(count) == has_more_tokens(text, count)


def _variants(text: str) -> list[str]:
    """``text`` as it also arrives: typographic punctuation, accented
    capitals, no-break spaces and invisible characters, decomposed accents."""
    typographic = (
        text.replace("'", "\u2019")
        .replace(' "', " \u201c")
        .replace('"', "\u201d")
        .replace(" - ", " \u2013 ")
        .replace("...", "\u2026")
        .replace(". ", " \u00b7 ", 3)
    )
    return [
        text,
        typographic,
        typographic.replace("e", "\u00c9", 7).replace(" a ", "\u00a0a\u00a0"),
        typographic.replace("in", "in\u00ad", 5).replace("th", "t\u200bh", 5),
        unicodedata.normalize("NFD", typographic.replace("e", "\u00e9", 9)),
        typographic.replace("A", "\uff21").replace("fi", "\ufb01"),
        text.upper(),
    ]


def test_neardup_corpus() -> None:
    texts = neardup_corpus.documents(min_words=1, max_words=2000)
    texts += [t for p in neardup_corpus.labelled_pairs(per_kind=2) for t in (p.a, p.b)]
    for text in texts:
        for variant in _variants(text):
            assert_same(variant)


def test_multilingual_corpus() -> None:
    texts = [t for group in multilingual_corpus.TEXTS.values() for t in group]
    pairs = multilingual_corpus.near_pairs() + multilingual_corpus.distinct_pairs()
    texts += [t for p in pairs for t in (p.a, p.b)]
    for text in texts:
        longer = "\n".join([text] * (1 + 1200 // len(text)))  # the shared numpy path
        for variant in (*_variants(text), *_variants(longer), f"Title: {text} and English"):
            assert_same(variant)


HOSTILE = [
    "",
    " ",
    " \n\t\u3000\u00a0\u2029 ",
    "\u200b",
    "\u200b\u00ad\ufeff",
    "a\u200bb c\u200cd e\u200df g\u2060h \ufeffi",
    "\u0301start with a mark",
    "e\u0301 a\u0308 o\u0302\u0323 \u0323\u0302",
    "Cafe\u0301 CAFE\u0301 caf\u00e9",
    "ＦＵＬＬＷＩＤＴＨ ｋａｔａｋａｎａ ｶﾀｶﾅ",
    "ﬁne ﬂow ① ② ㎏ ™ ½ ² µ ª º ¹ ¼ ¨ ¯ ´ ¸",
    "ΟΔΟΣ ΟΔΟΣ. Σ ΑΣ' ΑΣ\u0301 ς σ",
    "İSTANBUL İi\u0307 Iı",
    "ǅ ǈ ǋ ǲ ẞ ß ŉ",
    "a\ud800b \udfff c\ud83d\ude00",
    "emoji 😀 👍🏽 family 👨\u200d👩\u200d👧 flags 🇫🇷",
    "mixed 中文文本 and English, ภาษาไทย too, 한국어 단어",
    "\x1c\x1d\x1e\x1f\x85 separators\x0b\x0cand\r\nlines",
    "\u2026\u2026... …start …end…",
    "nbsp\u00a0\u00a0\u00a0runs\u202fnarrow\u2009thin\u2002en",
    "x" * 5000,
    " ".join(["word"] * 3000),
    "É" * 2000 + " " + "\u2019" * 2000,
    "a\u0301" * 300,  # many stretches: the whole text is normalized
    "é " * 200 + "ΣΑΣ " * 200,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile(text: str) -> None:
    for variant in (text, f"Intro words here {text} outro words there", text * 3):
        assert_same(variant)


def _long(size: int, extra: str) -> str:
    rng = random.Random(size)
    words = neardup_corpus.vocabulary()
    text = " ".join(rng.choice(words) for _ in range(size // 5))
    return (text[: size // 2] + extra + text[size // 2 :])[:size]


@pytest.mark.parametrize(
    "size", [SHARED_MAX_CHARS - 1, SHARED_MAX_CHARS, SHARED_MAX_CHARS + 1, 3 * SHARED_MAX_CHARS]
)
@pytest.mark.parametrize("extra", ["", "\u2019\u00e9\u00c9\u00a0", "e\u0301\u200b\ud800 中文"])
def test_texts_above_the_digest_piece(size: int, extra: str) -> None:
    assert_same(_long(size, extra))


PLAIN = "and enough plain words after them for the fold to be worth it " * 5


def test_every_character_folded_alone() -> None:
    """Each BMP character that the byte fold handles alone (``_folded_char``
    not ``None``) normalizes as the general path does, between letters,
    after capitals, next to spaces and accents."""
    folded = 0
    for code in range(0x80, 0x10000):
        char = chr(code)
        if 0xD800 <= code < 0xE000 or _folded_char(char) is None:
            continue
        folded += 1
        text = f"Ab{char}C d{char} {char}e {char}\u00e9 \u00c9{char}{char} \u2019{char} {PLAIN}"
        normalized = NormalizedText(text)
        assert normalized.folded() is not None
        assert normalized.utf8() == normalized_utf8(text), hex(code)
        assert normalized.shingle_hashes().tolist() == shingle_hashes(text).tolist(), hex(code)
    assert folded > 20000  # Latin, Greek and Cyrillic lowercase, punctuation, symbols
