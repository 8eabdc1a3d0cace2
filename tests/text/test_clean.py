# ruff: noqa: RUF001  (lookalike characters are what these tests are about)
"""What the content stage compares: which texts are one exact duplicate after
cleaning and normalization, which are not, and which are left as they are."""

from __future__ import annotations

import hashlib
import random
import unicodedata

import pytest

from scrapy_dedup.text import clean, shingles
from scrapy_dedup.text._hashing import GOLDEN, mix64
from scrapy_dedup.text.clean import (
    TEXT_VERSION,
    clean_text,
    content_digest,
    extract_text,
    looks_like_html,
)
from scrapy_dedup.text.near import MinHashMethod
from scrapy_dedup.text.shingles import (
    CHUNK_CHARS,
    has_more_tokens,
    normalize_text,
    normalize_text_chunks,
    shingle_hashes,
)

FRENCH = (
    "Le garçon a mangé une crème brûlée à l'hôtel de la côte, près du théâtre où "
    "l'été dernier un écrivain célèbre a lu ses poèmes préférés devant une foule émue."
)


def digest(text: str) -> bytes:
    return content_digest(clean_text(text))


def near(a: str, b: str) -> bool:
    method = MinHashMethod(0.75)
    return method.match(method.fingerprint(a), method.fingerprint(b)) is not None


def test_text_version_is_exported() -> None:
    assert TEXT_VERSION == 2
    assert "TEXT_VERSION" in clean.__all__


@pytest.mark.parametrize(
    "variant",
    [
        unicodedata.normalize("NFD", FRENCH),
        FRENCH.replace("crème", "cr\u200bème").replace("poèmes", "po\u00adèmes"),
        FRENCH.replace("garçon", "gar\u200cçon").replace("hôtel", "hô\u200dtel"),
        FRENCH.replace("théâtre", "thé\u2060âtre"),
        "\ufeff" + FRENCH,
        FRENCH.replace("Le garçon", "Ｌｅ ｇａｒçｏｎ"),  # fullwidth letters
        FRENCH.replace("crème brûlée", "cr&egrave;me br&ucirc;l&eacute;e"),
        FRENCH.replace("crème", "cr&#232;me").replace("côte", "c&#xF4;te"),
        FRENCH.replace("é", "e\u0301"),
    ],
)
def test_unicode_variants_are_exact_duplicates(variant: str) -> None:
    assert variant != FRENCH
    assert digest(variant) == digest(FRENCH)
    # Shingles agree, so the near-duplicate stage sees the same text too.
    assert shingle_hashes(clean_text(variant)).tolist() == shingle_hashes(FRENCH).tolist()


def test_entities_in_plain_text_are_decoded() -> None:
    assert digest("Caf&eacute; Tom &amp; Jerry") == digest("Café Tom & Jerry")
    assert clean_text("Tom &amp; Jerry &#8212; caf&eacute;") == "Tom & Jerry \u2014 café"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Room 101 costs 17 euros", "Room 107 costs 11 euros"),  # different digits
        ("Le résumé du livre", "Le resume du livre"),  # accents carry meaning
        ("la côte", "la cote"),
        ("la côte", "le côté"),
        ("Straße", "Strasse"),
        ("Der Hund bellt", "Der Hund beißt"),
        ("中文文本", "中文文字"),
        ("price: 5", "price: ５0"),
        ("AT&T and R&D", "AT and R"),
        ("?id=1&section=2", "?id=1§ion=2"),
    ],
)
def test_different_texts_stay_different(a: str, b: str) -> None:
    assert digest(a) != digest(b)


@pytest.mark.parametrize(
    "text",
    [
        "use the <p> tag for paragraphs",
        "Wrap each item in an <li> element; close the list with </ul>.",
        "a < b and c > d, so <b> is not bold here",
        "List<T> and Map<K, V> are generic types",
        "Type <br> for a line break.",
        "AT&T, R&D and ?id=1&section=2 stay as they are",
        "if x<y and y>z: print('<div>')",
    ],
)
def test_plain_text_that_mentions_tags_is_not_altered(text: str) -> None:
    assert not looks_like_html(text)
    assert clean_text(text) == text


def test_a_quoted_tag_is_not_an_exact_duplicate_of_the_sentence_without_it() -> None:
    assert digest("use the <p> tag for paragraphs") != digest("use the tag for paragraphs")
    item = {"body": "use the <div> tag for blocks"}
    assert extract_text(item, ["body"]) == "use the <div> tag for blocks"


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<p>Hello, <b>World</b></p>", "Hello, World"),
        ("<!DOCTYPE html><html><body>Hello world", "Hello world"),
        ("Hello<br>world", "Hello world"),
        ("Hello.<br/>World", "Hello. World"),
        ("<div class='a > b'>Hello</div> world", "Hello world"),
        ("Hello <!-- a comment --> world <span>!</span>", "Hello world !"),
        ("<p>Hi<script>x('<p>')</script> there</p>", "Hi there"),
        ("<p>&lt;p&gt; is a tag, caf&eacute; &copy 2024</p>", "<p> is a tag, café © 2024"),
    ],
)
def test_real_html_is_still_stripped(html: str, text: str) -> None:
    assert looks_like_html(html)
    assert clean_text(html).split() == text.split()
    assert digest(html) == digest(text)


@pytest.mark.parametrize(
    "text",
    [
        "<p " * 20_000,  # looks_like_html scanned to the end from every "<"
        "<a" * 30_000,
        "<!--" * 15_000,
        "&lt;p " * 10_000,
        "&" + "a" * 60_000,
    ],
)
def test_hostile_plain_texts_are_returned_as_they_decode(text: str) -> None:
    assert clean_text(text) == text.replace("&lt;", "<")


def test_hostile_html_is_cleaned() -> None:
    escaped = "<p>" + "&lt;p " * 10_000 + "</p>"
    once = clean_text(escaped)
    assert once.split() == ["<p"] * 10_000
    assert clean_text(once) == once  # decoded tags are prose, never stripped again
    unclosed = "<p>x</p>" + '<a "' * 10_000
    assert clean_text(unclosed).split()[0] == "x"
    # A numeric reference of thousands of digits is out of range, not an error.
    assert clean_text("<p>x</p>&#" + "9" * 5_000 + ";").split() == ["x", "\ufffd"]


def _reference_digest(text: str) -> bytes:
    return hashlib.sha256(normalize_text(text).encode("utf-8", "surrogatepass")).digest()[:16]


def test_long_text_digest_streams_across_chunk_boundaries() -> None:
    # Decomposed accents everywhere, so a chunk boundary falls between a base
    # letter and its combining mark unless it is moved.
    nfd = unicodedata.normalize("NFD", FRENCH + " ")
    text = nfd * (3 * CHUNK_CHARS // len(nfd))
    assert len(text) > 2 * CHUNK_CHARS
    assert content_digest(text) == content_digest(unicodedata.normalize("NFC", text))
    assert content_digest(text) == _reference_digest(text)
    # No space at all: cut inside words, between ideographs, never before a mark.
    for piece in ("e\u0301te\u0301", "中文", "ab12", "ΑΣ"):
        solid = piece * (CHUNK_CHARS // len(piece) + 7)
        assert content_digest(solid) == _reference_digest(solid)
        assert content_digest(solid) == content_digest(unicodedata.normalize("NFC", solid))


def test_long_text_shingles_stream_across_chunk_boundaries() -> None:
    words = [*unicodedata.normalize("NFD", FRENCH).split(), "中文", "文本"]
    rng = random.Random(4)
    text = " ".join(rng.choice(words) for _ in range(CHUNK_CHARS // 2))
    assert len(text) > 2 * CHUNK_CHARS
    normalized = normalize_text(text)
    assert shingle_hashes(text).tolist() == shingle_hashes(normalized).tolist()
    assert near(text, unicodedata.normalize("NFC", text))


_TRICKY = list("aAbΣσς .,é\u0301\u0308\u0316\u00a8\u00ad\u200b\u3000\n中文かが\u3099ｶﾞ")
_TRICKY += list("\u0e01\u0e34\u0e33\u1100\u1161\u11a8각ＡＢ１\ufb01İ²…\ud800\U0001f600")


def test_chunked_normalization_equals_whole_text_normalization() -> None:
    rng = random.Random(12)
    for _ in range(3_000):
        text = "".join(rng.choice(_TRICKY) for _ in range(rng.randint(0, 40)))
        whole = normalize_text(text)
        for size in (1, 2, 3, 7):
            assert "".join(normalize_text_chunks(text, size)) == whole, (text, size)
        assert normalize_text(whole) == whole  # idempotent
        assert shingle_hashes(text).tolist() == shingle_hashes(whole).tolist()


def _reference_shingles(text: str, size: int = 3) -> list[int]:
    """shingle_hashes as its docstring defines it, in plain Python: tokens of
    normalize_text (a character of a script without spaces is one), hashed."""
    mask, solo_ranges = (1 << 64) - 1, shingles._SOLO_RANGES
    tokens: list[str] = []
    for word in normalize_text(text).split():
        current = ""
        for char in word:
            if any(lo <= ord(char) <= hi for lo, hi in solo_ranges):
                tokens += [current, char] if current else [char]
                current = ""
            else:
                current += char
        if current:
            tokens.append(current)
    hashes = [
        mix64(sum((ord(c) + 1) * pow(GOLDEN, j, 1 << 64) for j, c in enumerate(t)) & mask)
        for t in tokens
    ]
    width = min(size, len(hashes))
    lanes = [mix64(i + 1) | 1 for i in range(width)]
    return [
        mix64(sum(lanes[i] * hashes[s + i] for i in range(width)) & mask)
        for s in range(max(len(hashes) - size + 1, 1) if hashes else 0)
    ]


def _mixed_texts(count: int, seed: int) -> list[str]:
    """English words with the characters the fast paths set aside: marks,
    ellipses, sigma, dotted I, format and fullwidth characters, CJK, Thai,
    astral, whitespace of every kind; MinHash's markers at the ends."""
    words = [*FRENCH.split(), "The", "quick", "fox,", "“smart”", "quotes’", "and", "—", "dashes"]
    tricky = [*_TRICKY, "\u00a0", "\u2028", "\u0085", "\u212a", "’", "—", "\ue000", "Ǆ", "ᾈ"]
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        parts = []
        for _ in range(rng.randint(0, 120)):
            roll = rng.random()
            parts.append(
                rng.choice(tricky) if roll < 0.2 else rng.choice(words) if roll < 0.8 else " "
            )
        text = "".join(parts) if i % 2 else " ".join(parts)
        texts.append(f"\ue000 \ue000 {text} \ue001 \ue001" if i % 3 == 0 else text)
    # Many stretches to normalize (more than are done one by one), and ASCII between markers.
    texts.append(" ".join(f"word{i}e\u0301 x…" for i in range(300)))
    ascii_body = " ".join(w for w in words * 3 if w.isascii())
    assert len(ascii_body) > 100
    ends = [("\ue000 \ue000 ", " \ue001 \ue001"), ("É\u0301 Ǆ\n\t", "\u00a0Σ ﬁ")]
    ends += [
        ("\u3000中文 文本 ", "  x’ 中"),
        ("“A “B ", " c” d”"),
        ("é\u200b e\u0301 ", " K\u212a"),
    ]
    texts += [head + ascii_body + tail for head, tail in ends]
    return texts


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("numpy_from", [0, shingles._NUMPY_MIN_CHARS], ids=["numpy", "default"])
def test_fast_paths_digest_and_shingle_as_the_definitions_do(
    seed: int, numpy_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shingles, "_NUMPY_MIN_CHARS", numpy_from)  # short texts too
    for text in _mixed_texts(400, seed):
        assert content_digest(text) == _reference_digest(text), text
        assert shingle_hashes(text).tolist() == _reference_shingles(text), text
        assert has_more_tokens(text, 3) == (len(_reference_shingles(text, 1)) > 3), text


@pytest.mark.parametrize("numpy_from", [0, shingles._NUMPY_MIN_CHARS], ids=["numpy", "default"])
def test_content_digest_of_english_is_sha256_of_the_normalized_text(
    numpy_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shingles, "_NUMPY_MIN_CHARS", numpy_from)
    # Plain ASCII, and Latin-1 with smart quotes, an ellipsis and a no-break space.
    for text in (
        "  The Quick\tbrown\n\nFOX  ",
        "It\u2019s \u201cfine\u201d\u2026 really\u00a0so \u2014 caf\u00e9",
        "\u03a3\u2026\u03a3 ok\u2026",
        "A\u03a3\u2026b O\u03a3\u2026 x\u2026\u0301",  # NFKC, then lowercase: "a\u03c3...b"
        "\ue000 \ue000 \u0130 ascii body\u2026 \ue001 \ue001",
    ):
        assert content_digest(text) == _reference_digest(text)
        assert shingle_hashes(text).tolist() == _reference_shingles(text)
    assert content_digest("a\u2026b") == content_digest("A...B")


def test_lowercasing_by_table_is_normalization_when_it_leaves_stable_characters() -> None:
    # What _normalized_codes relies on, for every BMP code point of this Python's
    # Unicode data: the table lowercases as str.lower does (or sets the character
    # aside), and a character whose lowercase is stable needs no NFKC (but for
    # whitespace, which is compared as a space whichever it is).
    lower, classes = shingles._LOWER, shingles._CLASS
    for code in range(0x10000):
        char = chr(code)
        if lower[code] == shingles._ASIDE:
            assert len(char.lower()) != 1 or code == 0x3A3, hex(code)
            continue
        assert chr(lower[code]) == char.lower(), hex(code)
        if classes[lower[code]] < shingles._UNSTABLE and not char.isspace():
            assert shingles._normalize_chars(char) == char.lower(), hex(code)
