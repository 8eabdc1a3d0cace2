"""Host template discounting (scrapy_dedup.text.template): what is learned as a
host's template, and which candidates a text's distinctive part confirms."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scrapy_dedup.stores import MemoryStore
from scrapy_dedup.text.minhash import best_match, jaccard_estimate, signature
from scrapy_dedup.text.near import MinHashMethod
from scrapy_dedup.text.shingles import shingle_hashes
from scrapy_dedup.text.template import (
    HALF_LIFE,
    TEMPLATE_PAGES,
    HostTemplate,
    TemplateModel,
    bin_minima,
)
from tests.text.neardup_corpus import swap_words, vocabulary, words_of
from tests.text.test_templated import english_site

FORM = " ".join(f"filter {n} field {n} is any of open closed order by {n}" for n in range(30))


def page(n: int, own_words: int = 15) -> str:
    rng = random.Random(n)
    return f"{FORM} {' '.join(f'w{rng.randrange(10**6)}' for _ in range(own_words))}"


def test_bin_minima_are_what_the_sketch_keeps() -> None:
    hashes = shingle_hashes(" ".join(f"word{n}" for n in range(2000)))
    minima = bin_minima(hashes)
    lanes = np.unpackbits(signature(hashes).sketch[:, None], axis=1, bitorder="little")
    sketch_lanes = (lanes[:, 0::2] + 2 * lanes[:, 1::2]).reshape(-1)
    filled = minima != np.iinfo(np.uint64).max
    assert filled.mean() > 0.95  # an empty bin borrows another's value (densification)
    assert np.array_equal((minima[filled] & np.uint64(3)).astype(np.uint8), sketch_lanes[filled])


def test_a_shingle_is_template_from_TEMPLATE_PAGES_pages() -> None:
    host = HostTemplate()
    values = shingle_hashes(FORM)
    for _ in range(TEMPLATE_PAGES):
        assert not host.is_template(values).any()
        host.learn(values)
    assert host.is_template(values).all()
    own = shingle_hashes(page(1))
    assert host.is_template(own).mean() > 0.5  # the form's
    assert not host.is_template(own).all()


def test_copies_of_one_text_teach_the_template_once() -> None:
    """Copies of a dropped near duplicate are never exact duplicates of a kept
    text, so they all reach the template: counted each time, the page's own
    text became the template and its next copy (its own part only its edit)
    was kept (issue 23's flaky crawl tests)."""
    from scrapy_dedup.text.clean import content_digest

    story = page(7, own_words=200)
    copy = story.replace(story.split()[-50], "changed", 1)
    model = TemplateModel()
    model.learn("site.test", shingle_hashes(story), content_digest(story))
    for _ in range(5):
        model.learn("site.test", shingle_hashes(copy), content_digest(copy))
    assert not model.host("site.test").is_template(shingle_hashes(story)).any()
    text = model.text("site.test", shingle_hashes(copy))
    assert text.confirms(signature(shingle_hashes(story)).sketch)[0]
    # Without the digest every copy counts: the story is all template now.
    model.learn("site.test", shingle_hashes(copy))
    assert model.host("site.test").is_template(shingle_hashes(story)).mean() > 0.9


def test_counts_are_halved_and_bounded() -> None:
    host = HostTemplate()
    values = shingle_hashes(FORM)
    for _ in range(10 * HALF_LIFE):
        host.learn(values)
    assert host.pages < HALF_LIFE
    assert int(host.counts.max()) <= 255
    assert host.counts.nbytes == 128 * 1024
    host.learn(np.empty(0, dtype=np.uint64))  # an empty text: nothing


def test_hosts_held_are_bounded() -> None:
    model = TemplateModel(max_hosts=4)
    for n in range(10):
        model.learn(f"h{n}.test", shingle_hashes(FORM))
    assert len(model) == 4
    assert model.nbytes() == 4 * 128 * 1024
    # A forgotten host starts again from nothing.
    assert model.host("h0.test").pages == 0


def _model_of(pages: list[str], host: str = "site.test") -> TemplateModel:
    model = TemplateModel()
    for text in pages:
        model.learn(host, shingle_hashes(text))
    return model


def test_pages_sharing_only_a_template_are_not_confirmed() -> None:
    model = _model_of([page(n) for n in range(10)])
    a, b = page(100), page(101)
    sa, sb = signature(shingle_hashes(a)), signature(shingle_hashes(b))
    assert jaccard_estimate(sa, sb) > 0.75  # the form makes them look alike
    text = model.text("site.test", shingle_hashes(a))
    assert text.distinctive_bins() > 5
    assert not text.confirms(sb.sketch)[0]
    assert text.similarity(sb.sketch)[0] < 0.3
    # Another host has learned nothing: there the whole text decides.
    cold = model.text("other.test", shingle_hashes(a))
    assert cold.confirms(sb.sketch)[0]


def test_a_copy_is_confirmed_and_an_all_template_page_too() -> None:
    model = _model_of([page(n) for n in range(10)])
    a = page(100, own_words=40)
    copy = a.replace(a.split()[-5], "changed")
    text = model.text("site.test", shingle_hashes(copy))
    assert text.confirms(signature(shingle_hashes(a)).sketch)[0]
    # The form alone, as on every empty result: nothing of its own, the whole text decides.
    for _ in range(TEMPLATE_PAGES):
        model.learn("site.test", shingle_hashes(FORM))
    bare = model.text("site.test", shingle_hashes(FORM))
    assert bare.distinctive_bins() == 0
    assert bare.confirms(signature(shingle_hashes(page(3))).sketch)[0]


def test_a_tiny_own_part_is_never_confirmed_by_chance() -> None:
    model = _model_of([page(n) for n in range(10)])
    misses = 0
    for n in range(200, 400):
        text = model.text("site.test", shingle_hashes(page(n, own_words=2)))
        others = np.stack(
            [signature(shingle_hashes(page(m, 2))).sketch for m in range(n + 1, n + 9)]
        )
        misses += int(text.confirms(others).any())
    assert misses == 0


def test_best_match_without_a_template_is_unchanged() -> None:
    a, b = signature(shingle_hashes(page(1, 40))), signature(shingle_hashes(page(1, 40) + " x"))
    candidates = np.stack([b.sketch])
    assert best_match(a.sketch, candidates, 0.75) == best_match(a.sketch, candidates, 0.75, None)
    assert best_match(a.sketch, candidates, 0.75) is not None


@pytest.mark.parametrize("seed", [0, 1])
def test_templated_site_edited_copies_still_found_with_a_warm_template(seed: int) -> None:
    """300 template words and 100 of their own, 400 pages learned: none of them
    is dropped, and a copy with 2% of its words changed is still found."""
    method, store, model = MinHashMethod(), MemoryStore(), TemplateModel()
    pages = english_site(seed, 400)

    for n, text in enumerate(pages):
        hashes = method.shingles(text)
        fingerprint = signature(hashes)
        fingerprint.template = model.text("site.test", hashes)
        assert store.match_near(method, fingerprint) is None, n
        store.add_near(method, fingerprint, f"u{n}")
        model.learn("site.test", hashes)
    rng, vocab = random.Random(seed), vocabulary()
    for n in rng.sample(range(len(pages)), 30):
        copy = swap_words(pages[n], max(1, len(words_of(pages[n])) // 50), rng, vocab)
        hashes = method.shingles(copy)
        fingerprint = signature(hashes)
        fingerprint.template = model.text("site.test", hashes)
        found = store.match_near(method, fingerprint)
        assert found is not None and found[0] == f"u{n}", n
