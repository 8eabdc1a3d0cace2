"""Near-duplicate quality: recall per edit kind and false drops, per method.

Runs the content stage's decision (exact digest, then the near-duplicate
method) on the labelled pairs of ``tests/text/neardup_corpus.py`` (real English
text: the Python language reference, stdlib docstrings, hand-written press
releases and product pages). For each pair a fresh store keeps ``a``, then
``b`` arrives: a positive pair is caught when ``b`` is judged a duplicate, a
negative pair is a false drop when it is. A second check feeds every corpus
document (none is a near duplicate of another) through one store and counts
the drops.

Usage: python benches/bench_quality.py [--per-kind N] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_dedup.stores import MemoryStore
from scrapy_dedup.text import content_digest
from scrapy_dedup.text.near import MinHashMethod, NearMethod, SimhashMethod
from tests.text.neardup_corpus import (
    KINDS_NEGATIVE,
    KINDS_POSITIVE,
    Pair,
    documents,
    labelled_pairs,
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

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
    print(f"\n(wall {time.perf_counter() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
