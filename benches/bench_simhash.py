"""Benchmark SimHash fingerprinting and the SimhashIndex against their anchors.

Run from the repository root::

    python benches/bench_simhash.py                  # about 1 minute on 2 cores
    python benches/bench_simhash.py --sizes 10000 100000 --queries 5000   # quick look

Two measurements, each with its anchor in the same run:

1. ``simhash`` time per 1000-word document: ``scrapy_dedup.text.simhash``
   against the recipe's pure-Python ``simhash`` (copied verbatim below). The
   documents are consecutive 1000-word chunks of the pydoc topics that ship with
   CPython (``pydoc_data.topics``), real English with some non-ASCII punctuation.
   Best of ``--repeat`` passes over all documents.
2. ``SimhashIndex.query`` time (``max_distance=3``) with 10k / 100k / 1M stored
   random fingerprints, against a numpy brute-force scan
   (``np.bitwise_count(arr ^ q) <= k`` over a uint64 array). Half the queries are
   stored fingerprints with 0-3 bits flipped (they have hits), half are random.
   Also the build time (``update`` from arrays, and one ``add`` per fingerprint)
   and the bytes per fingerprint, counted two ways: ``nbytes`` of the index's
   numpy arrays, and ``tracemalloc`` (everything the index retains after a bulk
   load, and after one-by-one ``add`` calls, which includes the insert buffer).

The cyclic garbage collector is disabled inside timed regions (as ``timeit``
does).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pydoc_data.topics import topics

import numpy as np

from scrapy_dedup.text import simhash as our_simhash
from scrapy_dedup.text.simhash_index import SimhashIndex

# --- The recipe's reference simhash, copied verbatim ---------------------------


# fmt: off
def simhash(text: str, bits: int = 64) -> int:
    vector = [0] * bits
    tokens = text.lower().split()
    # shingles of 3 tokens work better than single words
    for i in range(max(len(tokens) - 2, 1)):
        shingle = " ".join(tokens[i:i + 3])
        h = int.from_bytes(hashlib.md5(shingle.encode()).digest()[:8], "big")
        for b in range(bits):
            vector[b] += 1 if (h >> b) & 1 else -1
    return sum(1 << b for b in range(bits) if vector[b] > 0)
# fmt: on

# -------------------------------------------------------------------------------


def best_time(func: Callable[[], object], repeat: int) -> float:
    """Best wall time of *repeat* calls of *func*, with the cyclic GC off."""
    best = float("inf")
    for _ in range(repeat):
        gc.disable()
        try:
            start = time.perf_counter()
            func()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def documents(words_per_doc: int = 1000) -> list[str]:
    words = " ".join(topics[key] for key in sorted(topics)).split()
    return [
        " ".join(words[i : i + words_per_doc])
        for i in range(0, len(words) - words_per_doc + 1, words_per_doc)
    ]


def bench_simhash(repeat: int) -> tuple[float, float]:
    """Prints the comparison; returns (ours, recipe) in seconds per document."""
    docs = documents()
    ascii_docs = sum(doc.isascii() for doc in docs)
    print(f"\n== simhash of a 1000-word document ({len(docs)} docs, {ascii_docs} pure ASCII)")
    ours = best_time(lambda: [our_simhash(doc) for doc in docs], repeat) / len(docs)
    recipe_docs = docs[:20]
    recipe = best_time(lambda: [simhash(doc) for doc in recipe_docs], max(2, repeat // 3))
    recipe /= len(recipe_docs)
    print(f"  recipe simhash (md5, pure Python): {recipe * 1e6:9.1f} us/doc")
    print(f"  scrapy_dedup.text.simhash:            {ours * 1e6:9.1f} us/doc")
    verdict = "meets" if recipe / ours >= 40 else "MISSES"
    print(f"  speedup: {recipe / ours:.1f}x  ({verdict} the >= 40x target)")
    return ours, recipe


def bench_index(size: int, queries: int, rng: np.random.Generator) -> tuple[float, float]:
    """Prints the comparison; returns (index, scan) in seconds per query."""
    k = 3
    fingerprints = rng.integers(0, 2**64, size=size, dtype=np.uint64)
    doc_ids = np.arange(size, dtype=np.int64)
    print(f"\n== SimhashIndex, {size:,} stored fingerprints, max_distance={k}")

    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    index = SimhashIndex(max_distance=k)
    index.update(fingerprints, doc_ids)
    bulk_build = time.perf_counter() - start
    gc.collect()
    traced_bulk = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()

    as_ints = fingerprints.tolist()
    incremental = SimhashIndex(max_distance=k)
    add = incremental.add
    start = time.perf_counter()
    for doc_id, fingerprint in enumerate(as_ints):
        add(fingerprint, doc_id)
    add_build = time.perf_counter() - start
    buffered = len(incremental._buffer_fingerprints)

    # Queries: half a stored fingerprint with 0-3 bits flipped, half random.
    picks = rng.integers(0, size, size=queries).tolist()
    flips = rng.integers(0, 64, size=(queries, 3)).tolist()
    query_list = rng.integers(0, 2**64, size=queries, dtype=np.uint64).tolist()
    for i in range(0, queries, 2):
        query = as_ints[picks[i]]
        for bit in flips[i][: i % 4]:
            query ^= 1 << bit
        query_list[i] = query
    query = index.query
    ours = best_time(lambda: [query(q) for q in query_list], 3) / queries
    mixed = incremental.query
    ours_buffered = best_time(lambda: [mixed(q) for q in query_list], 3) / queries
    brute_queries = query_list[: max(20, min(queries, 2_000_000 // size * 20))]

    def brute() -> None:
        for q in brute_queries:
            np.flatnonzero(np.bitwise_count(fingerprints ^ np.uint64(q)) <= k)

    scan = best_time(brute, 3) / len(brute_queries)
    # Same answers as the scan, on a sample.
    for q in brute_queries[:50]:
        expected = sorted(
            np.flatnonzero(np.bitwise_count(fingerprints ^ np.uint64(q)) <= k).tolist()
        )
        assert sorted(doc for doc, _ in index.query(q)) == expected
    hits = sum(bool(index.query(q)) for q in query_list[:1000]) / min(queries, 1000)

    print(
        f"  build: update() {bulk_build * 1e3:8.1f} ms total;  add() one by one "
        f"{add_build / size * 1e6:.2f} us/insert ({add_build:.2f} s, merges included)"
    )
    print(
        f"  query: index {ours * 1e6:7.2f} us   (index with {buffered:,} entries still in "
        f"the insert buffer: {ours_buffered * 1e6:.2f} us)"
    )
    print(
        f"         numpy brute-force scan {scan * 1e6:9.1f} us   -> index is "
        f"{scan / ours:.0f}x faster   ({hits:.0%} of queries have hits)"
    )
    print(
        f"  memory: {index.nbytes() / size:.1f} bytes/fingerprint (nbytes of numpy arrays); "
        f"{traced_bulk / size:.1f} (tracemalloc, after update())"
    )
    return ours, scan


def bench_add_memory(size: int, rng: np.random.Generator) -> None:
    as_ints = rng.integers(0, 2**64, size=size, dtype=np.uint64).tolist()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    index = SimhashIndex(max_distance=3)
    for doc_id, fingerprint in enumerate(as_ints):
        index.add(fingerprint, doc_id)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    buffered = len(index._buffer_fingerprints)
    print(
        f"\n== memory after {size:,} add() calls (tracemalloc): {traced / size:.1f} "
        f"bytes/fingerprint, {buffered:,} of them in the insert buffer"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7, help="passes for simhash timing")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    print(
        f"Python {sys.version.split()[0]}, numpy {np.__version__}, {platform.machine()}, "
        f"{platform.processor() or platform.platform()}"
    )
    rng = np.random.default_rng(args.seed)
    ours, recipe = bench_simhash(args.repeat)
    index = {size: bench_index(size, args.queries, rng) for size in args.sizes}
    bench_add_memory(min(100_000, max(args.sizes)), rng)
    if args.json:
        from _results import Results

        results = Results("bench_simhash", sys.argv[1:] if argv is None else argv)
        results.add(
            "simhash of a 1000-word document, vs the recipe's simhash",
            ours * 1e6,
            recipe * 1e6,
            unit="us",
            target=f"ratio <= {1 / 40}",
            note="at least 40x faster",
        )
        for size, (query, scan) in index.items():
            results.add(
                f"SimhashIndex.query, {size:,} fingerprints, vs a numpy scan",
                query * 1e6,
                scan * 1e6,
                unit="us",
            )
        results.write(args.json)


if __name__ == "__main__":
    main()
