"""Near-duplicate quality: recall per edit kind and false drops, per method.

Runs the content stage's decision (exact digest, then the near-duplicate
method) on the labelled pairs of ``tests/text/neardup_corpus.py`` (real English
text: the Python language reference, stdlib docstrings, hand-written press
releases and product pages). For each pair a fresh store keeps ``a``, then
``b`` arrives: a positive pair is caught when ``b`` is judged a duplicate, a
negative pair is a false drop when it is. A second check feeds every corpus
document (none is a near duplicate of another) through one store and counts
the drops.

A third part measures what the MinHash band layout does at each threshold,
the fixed 16 bands of 4 rows of earlier versions against the layout chosen
by the threshold (``lsh_layout``): on real texts edited until their Jaccard
similarity is the threshold + 0.05 (and the threshold itself), the share of
pairs that meet in a band and the share dropped; and what it costs: bands
per kept text, and how often texts that are not near duplicates (same
template, same source, the whole corpus) meet in a band, each a wasted
comparison.

Usage: python benches/bench_quality.py [--per-kind N] [--seed S] [--thresholds 0.5,0.6]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_dedup.stores import MemoryStore
from scrapy_dedup.text import content_digest
from scrapy_dedup.text.minhash import MinHashLSH, band_probability, lsh_layout
from scrapy_dedup.text.near import MinHashMethod, NearMethod, SimhashMethod
from tests.text.neardup_corpus import (
    KINDS_NEGATIVE,
    KINDS_POSITIVE,
    Pair,
    documents,
    labelled_pairs,
    pairs_at_similarity,
    summary,
)

METHODS: dict[str, Callable[[], NearMethod | None]] = {
    "recipe: simhash k=3": lambda: SimhashMethod(3),
    "simhash k=6": lambda: SimhashMethod(6),
    "minhash J>=0.75 (default)": lambda: MinHashMethod(0.75),
    "minhash J>=0.85": lambda: MinHashMethod(0.85),
    "exact digest only": lambda: None,
}


def is_duplicate(method: NearMethod | None, store: MemoryStore, text: str, url: str) -> bool:
    """The pipeline's decision for one text; keeps it when it is unique."""
    digest = content_digest(text)
    if store.get_content(digest) is not None:
        return True
    if method is not None and store.match_or_add_near(method, method.fingerprint(text), url):
        return True
    store.add_content(digest, url)
    return False


def evaluate(make: Callable[[], NearMethod | None], pairs: Sequence[Pair]) -> dict[str, float]:
    caught: dict[str, list[bool]] = {}
    for pair in pairs:
        method, store = make(), MemoryStore()
        is_duplicate(method, store, pair.a, "a")
        caught.setdefault(pair.kind, []).append(is_duplicate(method, store, pair.b, "b"))
    return {kind: sum(hits) / len(hits) for kind, hits in caught.items()}


def corpus_false_drops(make: Callable[[], NearMethod | None], docs: Sequence[str]) -> int:
    method, store = make(), MemoryStore()
    return sum(is_duplicate(method, store, doc, str(i)) for i, doc in enumerate(docs))


def _meet(index: MinHashLSH, a: Any, b: Any) -> bool:
    return bool(set(index.band_keys(a)) & set(index.band_keys(b)))


def layout_recall(
    threshold: float, similarity: float, seed: int, fixed: bool
) -> tuple[int, float, float]:
    """``(pairs, met, dropped)`` on pairs of about ``similarity``: the share
    that meet in a band, and the share a store drops (a band, then the
    estimate), with the fixed layout or the threshold's."""
    method = MinHashMethod(threshold)
    index = MinHashLSH(bands=16, rows=4, threshold=threshold) if fixed else method.new_index()
    pairs = pairs_at_similarity(similarity, seed=seed, per_document=2, within=0.01)
    ids: dict[str, int] = {}
    signatures = [(method.fingerprint(a), method.fingerprint(b)) for a, b, _ in pairs]
    for (a, _, _), (sa, _) in zip(pairs, signatures, strict=True):
        if a not in ids:
            ids[a] = len(ids)
            index.add(sa, ids[a])
    met = dropped = 0
    for (a, _, _), (sa, sb) in zip(pairs, signatures, strict=True):
        met += _meet(index, sa, sb)
        dropped += any(doc == ids[a] for doc, _ in index.query(sb))
    return len(pairs), met / len(pairs), dropped / len(pairs)


def chance_meetings(threshold: float, seed: int, fixed: bool) -> dict[str, float]:
    """How often texts that are not near duplicates meet in a band: per
    negative kind, and over every pair of corpus documents."""
    method = MinHashMethod(threshold)
    index = MinHashLSH(bands=16, rows=4, threshold=threshold) if fixed else method.new_index()
    found = {}
    pairs = labelled_pairs(seed=seed, per_kind=100)
    for kind in ("shared_template", "same_source", "unrelated"):
        of_kind = [p for p in pairs if p.kind == kind]
        found[kind] = sum(
            _meet(index, method.fingerprint(p.a), method.fingerprint(p.b)) for p in of_kind
        ) / len(of_kind)
    keys = [set(index.band_keys(method.fingerprint(doc))) for doc in documents(seed=seed)]
    found["corpus"] = sum(bool(a & b) for a, b in combinations(keys, 2)) / (
        len(keys) * (len(keys) - 1) / 2
    )
    return found


def print_layouts(thresholds: Sequence[float], seed: int) -> None:
    print("\nMinHash bands by threshold: fixed 16x4 (before) vs the threshold's layout (now)")
    print(
        "Pairs of real text edited to a 3-shingle Jaccard similarity J (+-0.01); "
        "'meet': share in a common band, 'drop': share dropped (a band, then the estimate):"
    )
    header = (
        f"{'threshold':>9} {'layout':>7} {'P(J=t)':>7} {'J':>5} {'pairs':>5}"
        f" {'meet 16x4':>9} {'meet now':>9} {'drop 16x4':>9} {'drop now':>9}"
    )
    print(header)
    for threshold in thresholds:
        bands, rows = lsh_layout(threshold)
        for similarity in (threshold, min(threshold + 0.05, 0.99)):
            n, met_fixed, drop_fixed = layout_recall(threshold, similarity, seed, fixed=True)
            _, met_now, drop_now = layout_recall(threshold, similarity, seed, fixed=False)
            print(
                f"{threshold:9.2f} {f'{bands}x{rows}':>7} "
                f"{band_probability(threshold, bands, rows):7.4f} {similarity:5.2f} {n:5d}"
                f" {met_fixed:9.3f} {met_now:9.3f} {drop_fixed:9.3f} {drop_now:9.3f}"
            )
    print(
        "\nCost: band keys per kept text, and the share of pairs of different texts "
        "that meet in a band (each a wasted comparison):"
    )
    kinds = ("shared_template", "same_source", "unrelated", "corpus")
    print(f"{'threshold':>9} {'layout':>13} {'bands':>5}" + "".join(f"{k:>16}" for k in kinds))
    for threshold in thresholds:
        bands, rows = lsh_layout(threshold)
        for fixed in (True, False):
            if fixed and (bands, rows) == (16, 4):
                continue
            chance = chance_meetings(threshold, seed, fixed)
            name = "16x4 (before)" if fixed else f"{bands}x{rows}"
            print(
                f"{threshold:9.2f} {name:>13} {16 if fixed else bands:5d}"
                + "".join(f"{chance[k]:16.5f}" for k in kinds)
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--thresholds",
        default="0.5,0.6,0.75,0.9",
        help="DEDUP_NEAR_THRESHOLD values for the band layout part",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    thresholds = [float(t) for t in args.thresholds.split(",")]

    started = time.perf_counter()
    pairs = labelled_pairs(seed=args.seed, per_kind=args.per_kind)
    docs = documents(seed=args.seed)
    print(summary(seed=args.seed, per_kind=args.per_kind))
    results: dict[str, dict[str, Any]] = {}
    for name, make in METHODS.items():
        t0 = time.perf_counter()
        results[name] = evaluate(make, pairs)
        results[name]["corpus"] = corpus_false_drops(make, docs)
        results[name]["seconds"] = time.perf_counter() - t0

    names = list(METHODS)
    width = max(len(k) for k in (*KINDS_POSITIVE, *KINDS_NEGATIVE)) + 2
    print("\nRecall per edit kind (share of duplicates caught; target >= 0.95):")
    print("kind".ljust(width) + "".join(n.rjust(26) for n in names))
    for kind in KINDS_POSITIVE:
        print(kind.ljust(width) + "".join(f"{results[n][kind]:26.3f}" for n in names))
    print("\nFalse drops per negative kind (share of different documents dropped; target 0):")
    for kind in KINDS_NEGATIVE:
        print(kind.ljust(width) + "".join(f"{results[n][kind]:26.3f}" for n in names))
    print(
        f"{'corpus (' + str(len(docs)) + ' docs)':<{width}}"
        + "".join(f"{results[n]['corpus']:26d}" for n in names)
    )
    print("\nMinimum recall over edit kinds up to 2% of words, and false drops:")
    for n in names:
        recall = min(results[n][k] for k in KINDS_POSITIVE)
        false = sum(results[n][k] > 0 for k in KINDS_NEGATIVE) + (results[n]["corpus"] > 0)
        verdict = "PASS" if recall >= 0.95 and not false else "MISS"
        print(f"  {n:<28} min recall {recall:.3f}  negative kinds with drops {false}  {verdict}")
    if args.json:
        from _results import Results

        ours, anchor = results["minhash J>=0.75 (default)"], results["recipe: simhash k=3"]
        out = Results("bench_quality", sys.argv[1:] if argv is None else argv)
        out.add(
            "near dup: min recall over edit kinds, vs the recipe's SimHash k=3",
            min(ours[k] for k in KINDS_POSITIVE),
            min(anchor[k] for k in KINDS_POSITIVE),
            target="ours >= 0.95",
        )
        out.add(
            "near dup: false drops (different documents dropped), vs the recipe's SimHash",
            sum(ours[k] > 0 for k in KINDS_NEGATIVE) + ours["corpus"],
            sum(anchor[k] > 0 for k in KINDS_NEGATIVE) + anchor["corpus"],
            unit="kinds + docs",
            target="ours == 0",
        )
        out.write(args.json)
    print_layouts(thresholds, args.seed)
    print(f"\n(wall {time.perf_counter() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
