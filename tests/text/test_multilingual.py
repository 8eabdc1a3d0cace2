"""Near and exact duplicates in languages with and without spaces between words,
through the real method: MinHash over the shingles of ``shingle_hashes``."""

from __future__ import annotations

import unicodedata

import pytest

from scrapy_dedup.text.clean import clean_text, content_digest
from scrapy_dedup.text.near import MinHashMethod
from scrapy_dedup.text.shingles import shingle_hashes
from tests.text.multilingual_corpus import NO_SPACES, TEXTS, Pair, distinct_pairs, near_pairs

NEAR = near_pairs()
DISTINCT = distinct_pairs()


def _match(a: str, b: str) -> bool:
    method = MinHashMethod(0.75)
    return method.match(method.fingerprint(a), method.fingerprint(b)) is not None


def _id(pair: Pair) -> str:
    return f"{pair.language}-{pair.kind}-{TEXTS[pair.language].index(pair.a)}"


def test_the_set_covers_every_language_and_kind() -> None:
    assert {p.language for p in NEAR} == set(TEXTS) >= NO_SPACES | {"fr", "ru", "ar"}
    assert {p.kind for p in NEAR} == {"one_char", "full_stop", "edit_2pct"}
    assert all(p.a != p.b for p in NEAR + DISTINCT)
    assert all(150 <= len(text) <= 1000 for texts in TEXTS.values() for text in texts)


@pytest.mark.parametrize("pair", NEAR, ids=_id)
def test_near_duplicates_match(pair: Pair) -> None:
    assert content_digest(clean_text(pair.a)) != content_digest(clean_text(pair.b))
    assert _match(pair.a, pair.b)


@pytest.mark.parametrize("pair", DISTINCT, ids=lambda p: f"{p.language}-distinct")
def test_different_texts_on_one_topic_do_not_match(pair: Pair) -> None:
    assert not _match(pair.a, pair.b)


@pytest.mark.parametrize("language", sorted(NO_SPACES))
def test_texts_without_spaces_are_shingled_by_character(language: str) -> None:
    text = TEXTS[language][0]
    letters = sum(not c.isspace() for c in unicodedata.normalize("NFKC", text))
    # About one shingle per character, not one per space-separated run.
    assert len(shingle_hashes(text)) >= 0.9 * letters


def test_space_separated_languages_keep_word_shingles() -> None:
    for language in ("fr", "ru", "ar", "ko"):
        text = TEXTS[language][1]
        assert len(shingle_hashes(text)) == len(text.split()) - 2


def test_mixed_text_shingles_latin_words_and_chinese_characters() -> None:
    mixed = "iPhone 15 Pro 的价格 比去年 低 twelve percent"
    tokens = ["iphone", "15", "pro", "的", "价", "格", "比", "去", "年", "低", "twelve", "percent"]
    assert len(shingle_hashes(mixed)) == len(tokens) - 2
    # The tokens are what the hash sees: the same tokens spaced out hash the same.
    assert shingle_hashes(mixed).tolist() == shingle_hashes(" ".join(tokens)).tolist()
    assert (
        shingle_hashes("iPhone15的价格").tolist() == shingle_hashes("iphone15 的 价 格").tolist()
    )


def test_one_changed_character_in_a_long_chinese_text_is_a_near_duplicate() -> None:
    text = ("".join(TEXTS["zh"]) * 3)[:1500]  # no space at all
    assert " " not in text
    changed = text[:700] + ("市" if text[700] != "市" else "城") + text[701:]
    assert _match(text, changed)
    assert _match(text, text + "。")


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_exact_duplicates_through_unicode_variants(language: str) -> None:
    text = TEXTS[language][2]
    digest = content_digest(clean_text(text))
    variants = [
        unicodedata.normalize("NFD", text),  # Hangul, accents (not Chinese)
        unicodedata.normalize("NFKD", text),
        text.replace(text[10], text[10] + "\u200b", 1),
        f"<div><p>{text}</p></div>",
        "\ufeff" + text.replace(" ", "\u3000"),
    ]
    for variant in variants:
        assert content_digest(clean_text(variant)) == digest
    other = TEXTS[language][0]
    assert content_digest(clean_text(other)) != digest
