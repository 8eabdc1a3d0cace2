"""The LSH bands follow DEDUP_NEAR_THRESHOLD: pairs at a low threshold are found
as surely as at the default, and the default keeps the layout stores hold."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from scrapy.settings import Settings

from scrapy_dedup.config import DedupConfig
from scrapy_dedup.stores import MemoryStore
from scrapy_dedup.text.minhash import (
    DEFAULT_LAYOUT,
    MIN_THRESHOLD,
    TARGET_RECALL,
    MinHashLSH,
    band_probability,
    jaccard_estimate,
    lsh_layout,
)
from scrapy_dedup.text.near import (
    INDEX_SUFFIX_GLOB,
    MinHashMethod,
    SimhashMethod,
    fitting_settings,
)
from tests.text.neardup_corpus import pairs_at_similarity

# threshold -> (bands, rows) for 128-value signatures
LAYOUTS = [
    (0.5, (35, 3)),
    (0.55, (26, 3)),
    (0.6, (19, 3)),
    (0.61, (31, 4)),
    (0.65, (24, 4)),
    (0.7, (17, 4)),
    (0.71, (16, 4)),
    (0.75, (16, 4)),
    (0.85, (16, 4)),
    (0.9, (16, 4)),
    (1.0, (16, 4)),
]


@pytest.mark.parametrize(("threshold", "layout"), LAYOUTS)
def test_the_layout_of_each_threshold(threshold: float, layout: tuple[int, int]) -> None:
    assert lsh_layout(threshold) == layout
    bands, rows = layout
    assert bands * rows <= 128
    assert band_probability(threshold, bands, rows) >= TARGET_RECALL
    method = MinHashMethod(threshold)
    assert (method.bands, method.rows) == (method.new_index().bands, method.new_index().rows)
    assert (method.bands, method.rows) == layout


def test_every_accepted_threshold_meets_its_pairs_in_a_band() -> None:
    previous = lsh_layout(1.0)
    for step in range(1000, int(MIN_THRESHOLD * 1000) - 1, -1):
        threshold = step / 1000
        bands, rows = lsh_layout(threshold)
        assert bands * rows <= 128, threshold
        assert rows >= 3, threshold  # 2 rows: a fifth of same-template pages meet
        assert band_probability(threshold, bands, rows) >= TARGET_RECALL, threshold
        # Lower thresholds never get longer bands.
        assert rows <= previous[1], threshold
        previous = (bands, rows)
    # Stores written with the default keep their index.
    assert lsh_layout(0.75) == DEFAULT_LAYOUT
    assert band_probability(0.5, *DEFAULT_LAYOUT) < 0.65  # what 0.5 used to get


def test_thresholds_below_what_the_bands_serve_still_get_the_likeliest_layout() -> None:
    # The settings refuse them; the pipeline's canonical filing signatures
    # (DEDUP_CANONICAL_MIN_SIMILARITY) never use bands, whatever the value.
    assert lsh_layout(0.3) == (49, 2)
    assert lsh_layout(0.001) == (128, 1)
    assert lsh_layout(0.75, num_perm=32) == (9, 3)  # 16 x 4 does not fit
    with pytest.raises(ValueError, match="threshold"):
        lsh_layout(0)
    with pytest.raises(ValueError, match="both"):
        MinHashLSH(bands=16)


def test_index_names_tell_layouts_apart() -> None:
    assert MinHashMethod().index_name == MinHashMethod(0.9).index_name == "minhash2-016x004"
    assert MinHashMethod(0.5).index_name == "minhash2-035x003"
    assert MinHashMethod(0.65).index_name == "minhash2-024x004"
    assert SimhashMethod(3).index_name == "simhash"
    assert SimhashMethod(6).index_name == "simhash-008x002"
    for name in ("minhash2-016x004", "minhash2-035x003", "simhash-008x002"):
        method, _, _ = name.partition("-")
        assert fnmatchcase(name, method + INDEX_SUFFIX_GLOB)
    assert not fnmatchcase("minhash2", "minhash2" + INDEX_SUFFIX_GLOB)
    # Fingerprints of the earlier 128 x 32-bit MinHash are filed under "minhash".
    assert MinHashMethod.name == "minhash2"
    assert "earlier" in fitting_settings("minhash-035x003")
    assert fitting_settings("minhash2-035x003") == "DEDUP_NEAR_THRESHOLD from 0.500 to 0.502"
    assert fitting_settings("minhash2-034x003") == "DEDUP_NEAR_THRESHOLD from 0.503 to 0.506"
    assert fitting_settings("minhash2-016x004") == "DEDUP_NEAR_THRESHOLD from 0.708 to 1.000"


@pytest.mark.parametrize("threshold", [0.5, 0.6])
def test_pairs_just_above_a_low_threshold_meet_in_a_band(threshold: float) -> None:
    """Real text with words swapped until its 3-shingle Jaccard similarity to
    the original is about threshold + 0.05: the bands bring at least 99% of
    the pairs together. The fixed 16 bands of 4 rows did not."""
    pairs = pairs_at_similarity(threshold + 0.05, seed=1, per_document=3)
    assert len(pairs) > 400
    method = MinHashMethod(threshold)
    fixed = MinHashLSH(bands=16, rows=4, threshold=threshold)
    met = fixed_met = 0
    for a, b, _ in pairs:
        sa, sb = method.fingerprint(a), method.fingerprint(b)
        met += bool(set(method.band_keys(sa)) & set(method.band_keys(sb)))
        fixed_met += bool(set(fixed.band_keys(sa)) & set(fixed.band_keys(sb)))
    assert met / len(pairs) >= TARGET_RECALL
    assert fixed_met / len(pairs) < 0.98  # 0.76 at 0.5, 0.97 at 0.6


@pytest.mark.parametrize("threshold", [0.5, 0.6])
def test_a_low_threshold_drops_every_pair_its_estimate_confirms(threshold: float) -> None:
    """Through a store, as the pipeline asks: of the pairs whose estimated
    similarity reaches the threshold, the later text is found to be a near
    duplicate of the kept one, under the kept one's URL."""
    pairs = pairs_at_similarity(threshold + 0.05, seed=2, per_document=2)
    method = MinHashMethod(threshold)
    store = MemoryStore()
    urls: dict[str, str] = {}
    for a, _, _ in pairs:
        if a not in urls:
            urls[a] = f"https://a.test/{len(urls)}"
            assert store.match_or_add_near(method, method.fingerprint(a), urls[a]) is None
    confirmed = found = 0
    for a, b, _ in pairs:
        sb = method.fingerprint(b)
        if jaccard_estimate(method.fingerprint(a), sb) < threshold:
            continue  # the estimate's verdict: not a near duplicate at this threshold
        confirmed += 1
        match = store.match_near(method, sb)
        found += match is not None and match[0] == urls[a]
    assert confirmed > 300
    assert found / confirmed >= TARGET_RECALL


@pytest.mark.parametrize("value", [0.49, 0.2, "0.3"])
def test_a_threshold_the_bands_cannot_serve_stops_the_crawl(value: object) -> None:
    with pytest.raises(ValueError, match=r"DEDUP_NEAR_THRESHOLD must be between 0\.5 and 1\.0"):
        DedupConfig.from_settings(Settings({"DEDUP_NEAR_THRESHOLD": value}))
    config = DedupConfig.from_settings(Settings({"DEDUP_NEAR_THRESHOLD": "0.5"}))
    assert config.near_threshold == 0.5
