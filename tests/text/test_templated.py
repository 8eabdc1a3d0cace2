"""Pages of one site template: 300 shared words and 100 of their own. They
resemble each other (3-shingle Jaccard about 0.6) but none is a near
duplicate of another, however many pages the site has; an edited copy of one
of them still is."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import lru_cache

import pytest

from scrapy_dedup.stores import MemoryStore
from scrapy_dedup.text.near import MinHashMethod
from tests.text.neardup_corpus import shingle_jaccard, swap_words, vocabulary, words_of

__all__ = ["english_site", "synthetic_site", "templated_drops"]

TEMPLATE_WORDS = 300
OWN_WORDS = 100


@lru_cache(maxsize=1)
def _english_words() -> tuple[str, ...]:
    from tests.text.neardup_corpus import documents

    return tuple(w for doc in documents(min_words=100, max_words=100_000) for w in doc.split())


def _english_run(
    rng: random.Random, words: tuple[str, ...], count: int, run: int = 10
) -> list[str]:
    """``count`` words of real English: runs of ``run`` consecutive words from random places."""
    out: list[str] = []
    while len(out) < count:
        start = rng.randrange(len(words) - run)
        out.extend(words[start : start + run])
    return out[:count]


def english_site(seed: int, pages: int) -> list[str]:
    """``pages`` pages of real English: a 150-word header and footer, and 100
    words of their own (runs of 10 words from random places of the corpus)."""
    rng = random.Random(f"templated-english:{seed}")
    words = _english_words()
    header = " ".join(_english_run(rng, words, TEMPLATE_WORDS // 2, 50))
    footer = " ".join(_english_run(rng, words, TEMPLATE_WORDS // 2, 50))
    return [
        f"{header}\n\n{' '.join(_english_run(rng, words, OWN_WORDS))}\n\n{footer}"
        for _ in range(pages)
    ]


def synthetic_site(seed: int, pages: int, vocab_size: int = 20_000) -> list[str]:
    """``pages`` pages of random words from a synthetic vocabulary."""
    rng = random.Random(f"templated-synthetic:{seed}")
    vocab = [f"w{n:x}" for n in range(vocab_size)]
    header = " ".join(rng.choices(vocab, k=TEMPLATE_WORDS // 2))
    footer = " ".join(rng.choices(vocab, k=TEMPLATE_WORDS // 2))
    return [f"{header} {' '.join(rng.choices(vocab, k=OWN_WORDS))} {footer}" for _ in range(pages)]


def templated_drops(
    is_duplicate: Callable[[str, str], str | None], pages: list[str], threshold: float
) -> tuple[int, int, list[float]]:
    """Feed one site's pages through ``is_duplicate(text, url) -> kept URL or
    None``: ``(dropped, false drops, true Jaccard of each false drop)``; a drop
    is false when the page's true 3-shingle Jaccard similarity to the page it
    was matched with is under ``threshold``."""
    by_url: dict[str, str] = {}
    dropped, false = 0, []
    for n, page in enumerate(pages):
        url = f"https://site.test/{n}"
        match = is_duplicate(page, url)
        if match is None:
            by_url[url] = page
            continue
        dropped += 1
        similarity = shingle_jaccard(page, by_url[match])
        if similarity < threshold:
            false.append(similarity)
    return dropped, len(false), false


def _store_judge(method: MinHashMethod) -> Callable[[str, str], str | None]:
    store = MemoryStore()

    def is_duplicate(text: str, url: str) -> str | None:
        match = store.match_or_add_near(method, method.fingerprint(text), url)
        return None if match is None else match[0]

    return is_duplicate


@pytest.mark.parametrize("site", [synthetic_site, english_site])
def test_no_page_of_a_templated_site_is_dropped(site: Callable[[int, int], list[str]]) -> None:
    method = MinHashMethod()
    for seed in range(5):
        pages = site(seed, 2000)
        sample = [shingle_jaccard(pages[0], p) for p in pages[1:40]]
        assert 0.5 < sum(sample) / len(sample) < 0.7  # they do look alike
        dropped, false, similarities = templated_drops(_store_judge(method), pages, 0.75)
        assert (dropped, false) == (0, 0), (seed, similarities)


def test_an_edited_copy_of_a_templated_page_is_still_found() -> None:
    method = MinHashMethod()
    store = MemoryStore()
    rng = random.Random(5)
    vocab = vocabulary()
    pages = english_site(7, 2000)
    for n, page in enumerate(pages):
        assert store.match_or_add_near(method, method.fingerprint(page), f"u{n}") is None
    for n in rng.sample(range(len(pages)), 60):
        copy = swap_words(pages[n], max(1, len(words_of(pages[n])) // 50), rng, vocab)  # 2%
        assert shingle_jaccard(pages[n], copy) > 0.85
        match = store.match_near(method, method.fingerprint(copy))
        assert match is not None and match[0] == f"u{n}", n
