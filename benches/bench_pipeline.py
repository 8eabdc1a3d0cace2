"""CPU per item of ``ContentDedupPipeline.process_item``, split by step, against commit 1ec33b8.

Run from the repository root::

    python benches/bench_pipeline.py             # about a minute on 2 cores
    python benches/bench_pipeline.py --profile   # also the top functions under cProfile

Issue 12 allows the whole add-on about 200 µs of CPU per fetched page (1.05x plain
Scrapy's ~4 ms). This measures the content stage's share on a duplicate-free stream of
real English documents (``neardup_corpus.documents()``, 300-2000 words), each item
``{"url": ..., "text": ...}`` through a real pipeline built the way Scrapy builds it
(``get_crawler`` + ``build_from_crawler``, memory store, default settings).

The anchor is the pipeline of commit 1ec33b8, extracted with ``git archive`` into a
temporary directory and imported under another package name, so both run in this one
process, interleaved round by round.

Each round sends the stream through a fresh pipeline (``process_item`` driven without an
event loop: the coroutine never awaits), timing each item, then runs the steps of
``_process`` again item by item on a fresh store, timing each: extract/clean, digest,
tokens check, shingles of the padded text, signature, index lookups and additions. Each
figure is the sum over items of that item's best round (so preemption on a busy machine
drops out), per item; "stats/other" is the total minus the steps (the ItemAdapter, the
hold/release bookkeeping, stats, the glue). The CPU time (``process_time``) of the best
whole round is printed too.

The cyclic GC is off inside timed regions (as ``timeit`` does).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import io
import platform
import pstats
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.text.neardup_corpus import documents  # noqa: E402

OLD_COMMIT = "1ec33b8"
_START, _END = "\ue000 \ue000", "\ue001 \ue001"


def load_package(name: str, commit: str | None, tmp: Path) -> ModuleType | None:
    """``scrapy_dedup`` of the working tree (``commit=None``), or of ``commit``
    renamed to ``name`` (``None`` outside a git checkout)."""
    if commit is None:
        return importlib.import_module("scrapy_dedup")
    try:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", commit, "scrapy_dedup"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    tmp.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    (tmp / "scrapy_dedup").rename(tmp / name)
    word = re.compile(r"\bscrapy_dedup\b")
    for path in (tmp / name).rglob("*.py"):
        path.write_text(word.sub(name, path.read_text()))
    sys.path.insert(0, str(tmp))
    return importlib.import_module(name)


class Impl:
    """One implementation of the pipeline and its steps, taken apart."""

    def __init__(self, label: str, package: ModuleType) -> None:
        self.label = label
        self.name = package.__name__
        self.pipeline_cls = package.ContentDedupPipeline
        self.clean = importlib.import_module(f"{self.name}.text.clean")
        self.shingles = importlib.import_module(f"{self.name}.text.shingles")
        self.minhash = importlib.import_module(f"{self.name}.text.minhash")
        self.adapter = importlib.import_module(f"{self.name}.pipeline").ItemAdapter
        self.has_more_tokens: Callable[[str, int], bool] | None = getattr(
            self.shingles, "has_more_tokens", None
        )

    def pipeline(self) -> Any:
        from scrapy.utils.misc import build_from_crawler
        from scrapy.utils.test import get_crawler

        crawler = get_crawler(settings_dict={})
        pipeline = build_from_crawler(self.pipeline_cls, crawler)
        pipeline.open_spider()
        return pipeline

    def signature(self, hashes: np.ndarray) -> Any:
        if hasattr(self.minhash, "minhash_signature"):  # the 128 x 32-bit MinHash
            return self.minhash.minhash_signature(hashes, 128)
        return self.minhash.signature(hashes)

    def tokens_check(self, text: str, count: int) -> bool:
        if self.has_more_tokens is not None:
            return self.has_more_tokens(text, count)
        return len(text.split(maxsplit=count)) > count


def drive(pipeline: Any, item: dict[str, str]) -> bool:
    """``process_item`` driven by hand (it never awaits); whether the item was kept."""
    coro = pipeline.process_item(item)
    try:
        coro.send(None)
    except StopIteration:
        pipeline._item_done(item)  # as the item_scraped signal would
        return True
    except Exception:
        pipeline._item_lost(item)
    return False


STEPS = ("extract/clean", "digest", "tokens check", "shingles", "signature", "index q+add")


def one_round(impl: Impl, items: Sequence[dict[str, str]]) -> tuple[float, np.ndarray]:
    """CPU seconds of the whole stream through ``process_item``, and the wall
    ns of each item: its ``process_item`` (column 0), then each step alone."""
    clock = time.perf_counter_ns
    ns = np.zeros((len(items), 1 + len(STEPS)), dtype=np.int64)
    pipeline = impl.pipeline()
    kept = 0
    gc.collect()
    gc.disable()
    try:
        cpu = time.process_time()
        for i, item in enumerate(items):
            t0 = clock()
            kept += drive(pipeline, item)
            ns[i, 0] = clock() - t0
        cpu = time.process_time() - cpu
        if kept != len(items):
            raise SystemExit(f"{impl.label}: {len(items) - kept} of {len(items)} items dropped")
        # The same steps again, item by item (caches as warm as in the pipeline),
        # on a fresh store.
        clean, shingles, adapter_cls = impl.clean, impl.shingles, impl.adapter
        fields, min_words, near = ["text"], pipeline.min_words, pipeline.near
        store = impl.pipeline().store
        shared = getattr(shingles, "NormalizedText", None)  # one normalization per item
        for i, item in enumerate(items):
            adapter = adapter_cls(item)
            t0 = clock()
            text = clean.extract_text(adapter, fields)
            t1 = clock()
            if shared is not None:  # (the normalization is counted in the digest)
                normalized = shared(text)
                digest = clean.content_digest(normalized)
                t2 = clock()
                normalized.has_more_tokens(min_words)
                t3 = clock()
                hashes = near.shingles_of(normalized)
            else:
                digest = clean.content_digest(text)
                t2 = clock()
                impl.tokens_check(text, min_words)
                t3 = clock()
                hashes = shingles.shingle_hashes(f"{_START} {text} {_END}")
            t4 = clock()
            fingerprint = impl.signature(hashes)
            t5 = clock()
            store.get_content(digest)
            store.match_near(near, fingerprint)
            store.add_content(digest, item["url"])
            store.add_near(near, fingerprint, item["url"])
            t6 = clock()
            ns[i, 1:] = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)
    finally:
        gc.enable()
    return cpu, ns


def profile(impl: Impl, items: Sequence[dict[str, str]], top: int) -> None:
    pipeline = impl.pipeline()
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [drive(pipeline, item) for item in items])
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\n--- cProfile, {impl.label} (tottime, {len(items)} items) ---")
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions")
    parser.add_argument("--no-old", action="store_true", help="skip the 1ec33b8 anchor")
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="REV",
        help="another git revision to run beside them (e.g. HEAD: the last commit, "
        "without the working tree's changes)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    docs = documents(min_words=300, max_words=2000)
    items = [{"url": f"https://site.example/page/{i}", "text": d} for i, d in enumerate(docs)]
    words = sum(len(d.split()) for d in docs) / len(docs)
    ascii_share = sum(d.isascii() for d in docs) / len(docs)
    print(
        f"Python {sys.version.split()[0]}, numpy {np.__version__}, {platform.machine()}; "
        f"{len(items)} items, {words:.0f} words on average, {ascii_share:.0%} pure ASCII"
    )
    with tempfile.TemporaryDirectory() as tmp:
        impls = []
        for rev in ([] if args.no_old else [OLD_COMMIT]) + args.also:
            package = re.sub(r"\W", "_", f"scrapy_dedup_{rev}")
            old = load_package(package, rev, Path(tmp) / package)
            if old is None:
                print(f"(no git checkout: {rev} is left out)")
            else:
                impls.append(Impl(rev, old))
        impls.append(Impl("new", load_package("scrapy_dedup", None, Path(tmp))))  # type: ignore[arg-type]
        for impl in impls:
            one_round(impl, items[:20])  # warm caches and power tables
        cpus: dict[str, list[float]] = {impl.label: [] for impl in impls}
        walls: dict[str, list[np.ndarray]] = {impl.label: [] for impl in impls}
        for _ in range(args.rounds):  # interleaved
            for impl in impls:
                cpu, ns = one_round(impl, items)
                cpus[impl.label].append(cpu)
                walls[impl.label].append(ns)
        n = len(items)
        labels = [impl.label for impl in impls]
        rows: dict[str, list[float]] = {}
        for label in labels:
            # Each item's best over the rounds: preemption and other processes drop out.
            per_item = np.min(np.stack(walls[label]), axis=0).sum(axis=0) / n / 1e3
            rows.setdefault("total", []).append(float(per_item[0]))
            for k, step in enumerate(STEPS, 1):
                rows.setdefault(step, []).append(float(per_item[k]))
            rows.setdefault("stats/other", []).append(float(per_item[0] - per_item[1:].sum()))
            rows.setdefault("CPU, whole stream", []).append(min(cpus[label]) / n * 1e6)
        head = "".join(f"{label + ' µs':>14}" for label in labels)
        head += "".join(f"{'new/' + label:>14}" for label in labels[:-1])
        print(f"\nPer item, {args.rounds} rounds (each item's best; steps timed one by one)")
        print(f"  {'step':<18}{head}")
        for key in (*STEPS, "stats/other", "total", "CPU, whole stream"):
            values = rows[key]
            row = "".join(f"{v:14.1f}" for v in values)
            row += "".join(
                f"{values[-1] / v:13.2f}x" if v > 0 else f"{'-':>14}" for v in values[:-1]
            )
            print(f"  {key:<18}{row}")
        print(
            "  (steps and total: wall time of each item, its best round, summed; stats/other"
            " = total - steps;\n   CPU: process_time of the stream's best round)"
        )
        if args.json:
            from _results import Results

            results = Results("bench_pipeline", sys.argv[1:] if argv is None else argv)
            for k, label in enumerate(labels[:-1]):
                for key in ("total", "CPU, whole stream"):
                    results.add(
                        f"ContentDedupPipeline per item ({key}), vs commit {label}",
                        rows[key][-1],
                        rows[key][k],
                        unit="us",
                    )
            if len(labels) == 1:
                results.add("ContentDedupPipeline per item (total)", rows["total"][0], unit="us")
            results.write(args.json)
        if args.profile:
            for impl in impls:
                profile(impl, items, 25)


if __name__ == "__main__":
    main()
