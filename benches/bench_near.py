"""The MinHash near-duplicate method at crawl scale, against datasketch and rensa.

In one run, on the same real English documents (``neardup_corpus.documents()``
of 300-2000 words, with about 10% injected near duplicates: 2% of the words
swapped): fingerprint time per document, insert+query time per document,
recall and false drops, for

- ours: one-permutation MinHash (128 band values of 16 bits, a 128-byte 2-bit
  sketch), the compact band index and :func:`best_match`;
- ours old: the 128 x 32-bit MinHash and dict-bucket index of commit 1ec33b8
  (loaded from git);
- datasketch: ``MinHash(num_perm=128)`` + ``MinHashLSH(threshold=0.75)``,
  candidates confirmed by ``jaccard() >= 0.75``;
- rensa: ``RMinHash(num_perm=128)`` + ``RMinHashLSH(threshold=0.75, num_bands=16)``,
  candidates confirmed the same way.

Then, with synthetic signatures: bytes per kept document at 100k and 1M (10M
with ``--full``), the p50/p99/max time of single query+add calls while the
index grows to 1M, and the bulk load of 1M stored fingerprints. Last, the
templated-site table: pages of 300 template words and 100 of their own, 2,000
pages per template, synthetic and real English: pages dropped and false drops.

Every time is also given as a ratio to each anchor (below 1: ours is faster).
Needs ``pip install -r benches/requirements.txt``.

Usage: python benches/bench_near.py [--full] [--templates N] [--docs-seeds N]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_dedup.text.minhash import (  # noqa: E402
    NUM_VALUES,
    SKETCH_BYTES,
    MinHashLSH,
    Signature,
)
from scrapy_dedup.text.near import MinHashMethod  # noqa: E402
from scrapy_dedup.text.shingles import shingle_hashes  # noqa: E402
from tests.text.neardup_corpus import (  # noqa: E402
    documents,
    shingle_jaccard,
    swap_words,
    vocabulary,
)
from tests.text.test_templated import english_site, synthetic_site, templated_drops  # noqa: E402

OLD_COMMIT = "1ec33b8"
THRESHOLD = 0.75
_START, _END = "\ue000 \ue000", "\ue001 \ue001"


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def load_old() -> types.ModuleType | None:
    """The MinHash module of commit 1ec33b8, or ``None`` outside a git checkout."""
    try:
        source = subprocess.run(
            ["git", "show", f"{OLD_COMMIT}:scrapy_dedup/text/minhash.py"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("old_minhash")
    exec(compile(source, "old_minhash.py", "exec"), module.__dict__)
    return module


def word_shingles(text: str) -> list[str]:
    """3-word shingles as strings, the way a datasketch or rensa user makes them."""
    w = f"{_START} {text} {_END}".lower().split()
    return [" ".join(w[i : i + 3]) for i in range(max(1, len(w) - 2))]


# -- the contenders: fingerprint, and an index judge ---------------------------------


class Contender:
    name = ""

    def fingerprint(self, text: str) -> Any:
        raise NotImplementedError

    def judge(self) -> Callable[[Any, int], int | None]:
        """``is_duplicate(fingerprint, doc) -> kept doc or None``; keeps new ones."""
        raise NotImplementedError


class Ours(Contender):
    name = "ours"

    def __init__(self) -> None:
        self.method = MinHashMethod(THRESHOLD)

    def fingerprint(self, text: str) -> Any:
        return self.method.fingerprint(text)

    def judge(self) -> Callable[[Any, int], int | None]:
        index = self.method.new_index()

        def is_duplicate(fp: Any, doc: int) -> int | None:
            found = index.query(fp)
            if found:
                return found[0][0]
            index.add(fp, doc)
            return None

        return is_duplicate


class OursOld(Contender):
    name = "ours old"

    def __init__(self, module: types.ModuleType) -> None:
        self.m = module

    def fingerprint(self, text: str) -> Any:
        return self.m.minhash_signature(shingle_hashes(f"{_START} {text} {_END}"))

    def judge(self) -> Callable[[Any, int], int | None]:
        index = self.m.MinHashLSH(threshold=THRESHOLD)

        def is_duplicate(fp: Any, doc: int) -> int | None:
            found = index.query(fp)
            if found:
                return int(found[0][0])
            index.add(fp, doc)
            return None

        return is_duplicate


class Datasketch(Contender):
    name = "datasketch"

    def __init__(self) -> None:
        import datasketch

        self.ds = datasketch

    def fingerprint(self, text: str) -> Any:
        m = self.ds.MinHash(num_perm=128)
        m.update_batch([s.encode() for s in word_shingles(text)])
        return m

    def judge(self) -> Callable[[Any, int], int | None]:
        lsh = self.ds.MinHashLSH(threshold=THRESHOLD, num_perm=128)
        kept: dict[int, Any] = {}

        def is_duplicate(fp: Any, doc: int) -> int | None:
            best, score = None, THRESHOLD
            for other in lsh.query(fp):
                j = fp.jaccard(kept[other])
                if j >= score:
                    best, score = other, j
            if best is None:
                lsh.insert(doc, fp)
                kept[doc] = fp
            return best

        return is_duplicate


class Rensa(Contender):
    name = "rensa"

    def __init__(self) -> None:
        import rensa

        self.r = rensa

    def fingerprint(self, text: str) -> Any:
        m = self.r.RMinHash(num_perm=128, seed=42)
        m.update(word_shingles(text))
        return m

    def judge(self) -> Callable[[Any, int], int | None]:
        lsh = self.r.RMinHashLSH(threshold=THRESHOLD, num_perm=128, num_bands=16)
        kept: dict[int, Any] = {}

        def is_duplicate(fp: Any, doc: int) -> int | None:
            best, score = None, THRESHOLD
            for other in lsh.query(fp):
                j = fp.jaccard(kept[other])
                if j >= score:
                    best, score = other, j
            if best is None:
                lsh.insert(doc, fp)
                kept[doc] = fp
            return best

        return is_duplicate


# -- part 1: real documents ---------------------------------------------------------


def corpus(seeds: int) -> tuple[list[str], dict[int, int]]:
    """Real documents and about 10% near duplicates: ``texts`` and ``{copy: original}``."""
    rng = random.Random(12)
    vocab = vocabulary()
    texts: list[str] = []
    for seed in range(seeds):
        texts += documents(min_words=300, max_words=2000, seed=seed)
    texts = list(dict.fromkeys(texts))
    copies: dict[int, int] = {}
    out: list[str] = []
    for text in texts:
        out.append(text)
        if rng.random() < 0.1:
            original = len(out) - 1
            out.append(swap_words(text, max(1, len(text.split()) // 50), rng, vocab))
            copies[len(out) - 1] = original
    return out, copies


def timed_fingerprints(c: Contender, texts: Sequence[str], reps: int) -> tuple[list[Any], float]:
    best = float("inf")
    fps: list[Any] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fps = [c.fingerprint(t) for t in texts]
        best = min(best, time.perf_counter() - t0)
    return fps, best / len(texts) * 1e6


def timed_judging(
    c: Contender, fps: Sequence[Any], copies: dict[int, int], texts: Sequence[str], reps: int
) -> tuple[float, float, int]:
    best = float("inf")
    verdicts: list[int | None] = []
    for _ in range(reps):
        judge = c.judge()
        gc.collect()
        t0 = time.perf_counter()
        verdicts = [judge(fp, n) for n, fp in enumerate(fps)]
        best = min(best, time.perf_counter() - t0)
    found = sum(verdicts[copy] is not None for copy in copies)
    false = sum(
        v is not None and n not in copies and shingle_jaccard(texts[n], texts[v]) < THRESHOLD
        for n, v in enumerate(verdicts)
    )
    return best / len(fps) * 1e6, found / max(len(copies), 1), false


def ratios(value: float, anchors: dict[str, float]) -> str:
    return "  ".join(f"{value / a:5.2f}x {n}" for n, a in anchors.items() if a and n != "ours")


def part_real(contenders: list[Contender], seeds: int, reps: int) -> dict[str, Any]:
    """Prints the comparison; returns the figures per contender."""
    texts, copies = corpus(seeds)
    words = statistics.mean(len(t.split()) for t in texts)
    print(
        f"\n== Real documents: {len(texts)} texts, {words:.0f} words on average, "
        f"{len(copies)} injected near duplicates (2% of words swapped)"
    )
    fp_us: dict[str, float] = {}
    ins_us: dict[str, float] = {}
    quality: dict[str, tuple[float, int]] = {}
    for c in contenders:
        fps, fp_us[c.name] = timed_fingerprints(c, texts, reps)
        ins_us[c.name], recall, false = timed_judging(c, fps, copies, texts, reps)
        quality[c.name] = (recall, false)
    # Signatures from prepared input: our shingle hashes, their shingle strings.
    hashes = [shingle_hashes(f"{_START} {t} {_END}") for t in texts]
    from scrapy_dedup.text.minhash import signature

    t0 = time.perf_counter()
    for h in hashes:
        signature(h)
    sig_only = {"ours": (time.perf_counter() - t0) / len(texts) * 1e6}
    strings = [word_shingles(t) for t in texts]
    for c in contenders:
        if c.name == "rensa":
            r = c.r  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            for s in strings:
                m = r.RMinHash(num_perm=128, seed=42)
                m.update(s)
            sig_only["rensa"] = (time.perf_counter() - t0) / len(texts) * 1e6
    print(
        f"{'':12}{'fingerprint us/doc':>20}{'insert+query us/doc':>21}{'recall':>8}"
        f"{'false drops':>12}"
    )
    for c in contenders:
        recall, false = quality[c.name]
        print(f"{c.name:12}{fp_us[c.name]:20.1f}{ins_us[c.name]:21.1f}{recall:8.3f}{false:12d}")
    print("ours vs anchors, fingerprint from text:   " + ratios(fp_us["ours"], fp_us))
    print("ours vs anchors, insert+query:            " + ratios(ins_us["ours"], ins_us))
    if "rensa" in sig_only:
        print(
            f"signature from prepared shingles (ours: hashes, rensa: strings): ours "
            f"{sig_only['ours']:.1f} us, rensa {sig_only['rensa']:.1f} us, "
            f"{sig_only['ours'] / sig_only['rensa']:.2f}x rensa"
        )
    # The estimate's error against the true 3-shingle Jaccard similarity.
    method = MinHashMethod()
    rng = random.Random(3)
    errors = []
    vocab = vocabulary()
    for t in rng.sample(texts, min(200, len(texts))):
        for fraction in (0.02, 0.05, 0.1):
            b = swap_words(t, max(1, int(len(t.split()) * fraction)), rng, vocab)
            a_, b_ = f"{_START} {t} {_END}", f"{_START} {b} {_END}"
            est = method.match(method.fingerprint(t), method.fingerprint(b))
            score = est[0] if est else _estimate(method, t, b)
            errors.append(abs(score - shingle_jaccard(a_, b_)))
    err = np.array(errors)
    print(
        f"estimate error vs true Jaccard ({len(err)} pairs at 0.7-0.95): mean {err.mean():.4f}, "
        f"90% {np.quantile(err, 0.9):.4f}, 95% {np.quantile(err, 0.95):.4f}, max {err.max():.4f}"
    )
    return {"fingerprint": fp_us, "insert": ins_us, "quality": quality}


def _estimate(method: MinHashMethod, a: str, b: str) -> float:
    from scrapy_dedup.text.minhash import jaccard_estimate

    return jaccard_estimate(method.fingerprint(a), method.fingerprint(b))


# -- part 2: memory, latency and bulk load at scale -----------------------------------


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 1 << 16, size=(n, NUM_VALUES), dtype=np.uint16)
    sketches = rng.integers(0, 256, size=(n, SKETCH_BYTES), dtype=np.uint8)
    return values, sketches


def part_scale(sizes: Sequence[int], contenders: list[Contender]) -> None:
    print("\n== Scale (synthetic signatures: every text distinct)")
    for n in sizes:
        values, sketches = synthetic(n, n)
        gc.collect()
        before = rss()
        index = MinHashLSH(threshold=THRESHOLD)
        times = np.empty(n, dtype=np.int64)
        cpu = np.empty(n, dtype=np.int64)
        clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
        for i in range(n):
            fp = Signature(values[i], sketches[i])
            t0, c0 = clock(), cpu_clock()
            if not index.query(fp):
                index.add(fp, i)
            cpu[i] = cpu_clock() - c0
            times[i] = clock() - t0
        gc.collect()
        grown = rss() - before
        del fp
        p50, p99 = np.percentile(times, [50, 99]) / 1e3
        print(
            f"ours, {n:>10,} texts one by one: {index.nbytes() / n:6.0f} B/text in arrays, "
            f"{grown / n:6.0f} B/text RSS growth; query+add p50 {p50:.1f} us, p99 {p99:.1f} us, "
            f"max {times.max() / 1e6:.2f} ms (mean {times.mean() / 1e3:.1f} us); "
            f"CPU time (thread): p99 {np.percentile(cpu, 99) / 1e3:.1f} us, "
            f"max {cpu.max() / 1e6:.2f} ms"
        )
        method = MinHashMethod()
        blobs = [
            values[i].astype("<u2").tobytes() + sketches[i].tobytes() for i in range(min(n, 10))
        ]
        assert method.decode_many(blobs)[0].shape == (len(blobs), NUM_VALUES)
        del index
        gc.collect()
        raw = np.concatenate([values.view(np.uint8).reshape(n, -1), sketches], axis=1)
        blob_list = [bytes(row) for row in raw[: min(n, 1_000_000)]]
        del raw
        t0 = time.perf_counter()
        v, s = method.decode_many(blob_list)
        t1 = time.perf_counter()
        bulk = MinHashLSH(threshold=THRESHOLD)
        bulk.add_many(v, s)
        took = time.perf_counter() - t0
        print(
            f"ours, {len(blob_list):>10,} stored fingerprints bulk-loaded "
            f"(decode_many + add_many): {took:.2f} s (add_many {time.perf_counter() - t1:.2f} s), "
            f"{bulk.nbytes() / len(blob_list):.0f} B/text"
        )
        del bulk, blob_list, v, s, values, sketches
        gc.collect()
    n = min(sizes)
    for c in contenders:
        if c.name not in ("datasketch", "rensa"):
            continue
        rng = random.Random(1)
        gc.collect()
        before = rss()
        judge = c.judge()
        t0 = time.perf_counter()
        for i in range(n):
            fp = _random_minhash(c, rng)
            judge(fp, i)
        took = time.perf_counter() - t0
        gc.collect()
        print(
            f"{c.name}, {n:>10,} texts: {(rss() - before) / n:6.0f} B/text RSS growth "
            f"(index and its signatures; {took / n * 1e6:.1f} us per signature+query+insert)"
        )
        del judge


def _random_minhash(c: Contender, rng: random.Random) -> Any:
    if c.name == "rensa":
        m = c.r.RMinHash(num_perm=128, seed=42)  # type: ignore[attr-defined]
        m.update([str(rng.getrandbits(40)) for _ in range(40)])
        return m
    m = c.ds.MinHash(num_perm=128)  # type: ignore[attr-defined]
    m.update_batch([str(rng.getrandbits(40)).encode() for _ in range(40)])
    return m


# -- part 3: templated sites ----------------------------------------------------------


def _url_judge(c: Contender) -> Callable[[str, str], str | None]:
    """``is_duplicate(text, url) -> kept URL or None`` over a fresh index of ``c``."""
    judge = c.judge()

    def is_duplicate(text: str, url: str) -> str | None:
        kept = judge(c.fingerprint(text), int(url.rsplit("/", 1)[1]))
        return None if kept is None else f"https://site.test/{kept}"

    return is_duplicate


def part_templated(contenders: list[Contender], templates: int, pages: int) -> dict[str, int]:
    """Prints the table; returns the false drops per contender (both sites)."""
    print(
        f"\n== Templated sites: {templates} templates x {pages} pages of 300 template words "
        "+ 100 of their own; dropped pages (false: true Jaccard to the match < 0.75)"
    )
    print(f"{'':12}" + "".join(f"{k:>28}" for k in ("synthetic", "real English")))
    drops: dict[str, int] = {}
    for c in contenders:
        cells = []
        for site in (synthetic_site, english_site):
            dropped = false = total = 0
            worst: list[float] = []
            t0 = time.perf_counter()
            for seed in range(templates):
                texts = site(seed, pages)
                d, f, sims = templated_drops(_url_judge(c), texts, THRESHOLD)
                dropped, false, total = dropped + d, false + f, total + len(texts)
                worst += sims
            took = (time.perf_counter() - t0) / total * 1e6
            span = f" J {min(worst):.2f}-{max(worst):.2f}" if worst else ""
            cells.append(f"{false:5d} false ({100 * false / total:.2f}%){span} {took:5.0f}us")
            drops[c.name] = drops.get(c.name, 0) + false
        print(f"{c.name:12}" + "".join(f"{cell:>28}" for cell in cells))
    return drops


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also 10M synthetic texts")
    parser.add_argument("--templates", type=int, default=3)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument(
        "--docs-seeds", type=int, default=1, help="documents() seeds (they overlap)"
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--skip", default="", help="comma-separated parts to skip: real,scale,templated"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    started = time.perf_counter()
    contenders: list[Contender] = [Ours()]
    old = load_old()
    if old is not None:
        contenders.append(OursOld(old))
    for make in (Datasketch, Rensa):
        try:
            contenders.append(make())
        except ImportError as e:
            print(f"(no {make.name}: {e}; pip install -r benches/requirements.txt)")
    real: dict[str, Any] = {}
    drops: dict[str, int] = {}
    if "real" not in skip:
        real = part_real(contenders, args.docs_seeds, args.reps)
    if "templated" not in skip:
        drops = part_templated(contenders, args.templates, args.pages)
    if "scale" not in skip:
        sizes = [100_000, 1_000_000] + ([10_000_000] if args.full else [])
        part_scale(sizes, contenders)
    if args.json:
        write_json(args.json, sys.argv[1:] if argv is None else argv, real, drops)
    print(f"\n(wall {time.perf_counter() - started:.0f}s)")
    return 0


def write_json(
    path: str, argv: Sequence[str], real: dict[str, Any], drops: dict[str, int]
) -> None:
    from _results import Results

    results = Results("bench_near", argv)
    anchors = [
        name for name in ("datasketch", "rensa") if name in drops or name in real.get("insert", {})
    ]
    if real:
        for what, key in (("fingerprint from text", "fingerprint"), ("insert+query", "insert")):
            for anchor in anchors:
                results.add(
                    f"MinHash {what} per document, vs {anchor}",
                    real[key]["ours"],
                    real[key][anchor],
                    unit="us",
                )
        recall, false = real["quality"]["ours"]
        results.add("MinHash recall of injected near duplicates", recall, target="ours >= 0.95")
        results.add("MinHash false drops, real documents", false, unit="docs", target="ours == 0")
    for anchor in anchors:
        if "ours" in drops and anchor in drops:
            results.add(
                f"templated sites: false drops, vs {anchor}",
                drops["ours"],
                drops[anchor],
                unit="pages",
                target="ours == 0",
            )
    results.write(path)


if __name__ == "__main__":
    raise SystemExit(main())
