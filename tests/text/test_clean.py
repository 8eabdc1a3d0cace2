# ruff: noqa: RUF001  (lookalike characters are what these tests are about)
"""What the content stage compares: which texts are one exact duplicate after
cleaning and normalization, which are not, and which are left as they are."""

from __future__ import annotations

import hashlib
import random
import unicodedata

import pytest

from scrapy_dedup.text import clean
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
