"""Benchmark the text steps of the content stage against the code they replaced.

Run from the repository root::

    python benches/bench_text.py                 # about 2-3 minutes on 2 cores
    python benches/bench_text.py --quick         # smaller shapes, no 50 MB memory children

Each measurement runs the anchor, the previous implementation copied verbatim
below (``clean_text`` with w3lib's ``replace_tags``, ``content_digest`` of
``" ".join(text.lower().split())``, ``shingle_hashes`` splitting on whitespace
only), in the same process:

1. Time of ``clean_text``, ``content_digest`` and ``shingle_hashes`` on real
   English (the pydoc topics that ship with CPython, some non-ASCII
   punctuation) of 1 KB, 100 KB, 5, 10 and 50 MB, with the time per MB, which
   stays flat when a step is linear. The anchor's ``shingle_hashes`` is not run
   above 10 MB (it needs about 2 GB at 50 MB).
2. The quadratic shapes of issue 12, each about 187 KiB: ``<p `` without ``>``
   (``looks_like_html``), unclosed tags inside HTML (``replace_tags``), a text
   of ``&lt;p `` cleaned twice (the decoded tags go through the regexes
   again), and a few more hostile ones; old and new time and the ratio.
3. Peak memory of each step on the 50 MB text: each step runs in a child
   process that builds the text and runs that one step, and the child's peak
   RSS (``VmHWM``, or ``resource.getrusage``) minus a child's that only builds
   the text is the step's extra memory.
4. ``shingle_hashes`` and ``content_digest`` on 1000-word English documents,
   old and new, as plain text, padded the way ``MinHashMethod.fingerprint``
   pads it (private-use markers: the speed the near-duplicate stage sees), and
   with the curly quotes and ellipses of a word processor (not Latin-1, and
   "\u2026" changes under NFKC). Also Chinese, whose tokens are now characters.

The cyclic GC is off inside timed regions (as ``timeit`` does); each figure is
the best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from pydoc_data.topics import topics

import numpy as np
import numpy.typing as npt
from w3lib.html import remove_comments, replace_entities, replace_tags

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_dedup.text import clean as new_clean
from scrapy_dedup.text import shingles as new_shingles
from scrapy_dedup.text._hashing import mix64_array
from scrapy_dedup.text.shingles import _LANES, _lane, _powers_for

# --- The previous implementation (before TEXT_VERSION 2), copied verbatim ------

_HTML_RE = re.compile(
    r"<(?:!doctype|html|head|body|div|p|br|span|a|h[1-6]|li|ul|ol|table|tr|td|section|article"
    r"|main|nav|header|footer|script|style|img)\b[^>]*>",
    re.IGNORECASE,
)


def old_looks_like_html(text: str) -> bool:
    return _HTML_RE.search(text) is not None


_HIDDEN_TAG_RE = re.compile(r"<(/?)(script|style|noscript|template)\b[^<>]*>", re.IGNORECASE)


def _old_drop_hidden(text: str) -> str:
    kept, pos, inside = [], 0, None
    for match in _HIDDEN_TAG_RE.finditer(text):
        closing, name = match.group(1), match.group(2).lower()
        if inside is None and not closing:
            kept.append(text[pos : match.start()])
            inside = name
        elif inside == name and closing:
            pos, inside = match.end(), None
    if inside is None:
        kept.append(text[pos:])
    return " ".join(kept)


def old_clean_text(text: str) -> str:
    if not old_looks_like_html(text):
        return text
    text = _old_drop_hidden(remove_comments(text))
    return replace_entities(replace_tags(text, " "))  # a tag separates words


def old_normalize_text(text: str) -> str:
    return " ".join(text.lower().split())


def old_content_digest(text: str) -> bytes:
    normalized = old_normalize_text(text).encode("utf-8", "surrogatepass")
    return hashlib.sha256(normalized).digest()[:16]


_OLD_SPACE = np.array([chr(c).isspace() for c in range(0x3002)], dtype=np.bool_)


def old_shingle_hashes(text: str, size: int = 3) -> npt.NDArray[np.uint64]:
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    if text.isascii():
        encoded = np.frombuffer(text.encode("ascii").lower(), dtype=np.uint8)
    else:
        lowered = text.lower().encode("utf-32-le", "surrogatepass")
        encoded = np.frombuffer(lowered, dtype="<u4")
    n = len(encoded)
    codes = encoded.astype(np.int64)
    space = _OLD_SPACE.take(codes, mode="clip")
    inside = np.zeros(n + 2, dtype=np.bool_)
    np.logical_not(space, out=inside[1:-1])
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    starts = edges[0::2]
    words = len(starts)
    if not words:
        return np.empty(0, dtype=np.uint64)
    powers, inv_powers = _powers_for(n)
    weighted = codes.view(np.uint64)
    weighted += np.uint64(1)
    weighted *= powers[:n]
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    np.cumsum(weighted, out=prefix[1:])
    word_hashes = prefix[edges[1::2]]
    word_hashes -= prefix[starts]
    word_hashes *= inv_powers[starts]
    mix64_array(word_hashes)
    count = max(words - size + 1, 1)
    width = min(size, words)
    hashes: npt.NDArray[np.uint64] = word_hashes[:count] * _LANES[0]
    for i in range(1, width):
        hashes += word_hashes[i : i + count] * _lane(i)
    return mix64_array(hashes)


# -------------------------------------------------------------------------------

STEPS: dict[str, dict[str, Callable[[str], object]]] = {
    "old": {
        "clean_text": old_clean_text,
        "content_digest": old_content_digest,
        "shingle_hashes": old_shingle_hashes,
    },
    "new": {
        "clean_text": new_clean.clean_text,
        "content_digest": new_clean.content_digest,
        "shingle_hashes": new_shingles.shingle_hashes,
    },
}
_PAD = ("\ue000 \ue000 ", " \ue001 \ue001")  # MinHashMethod.fingerprint's markers


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


def english() -> str:
    return " ".join(topics[key] for key in sorted(topics))


def text_of(chars: int) -> str:
    """*chars* characters of real English (whole repeats of the pydoc topics
    when that long: one allocation, so a child's peak RSS is the text's)."""
    base = english()
    if chars >= len(base):
        return base * (chars // len(base))
    return base[:chars]


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:8.2f} s "
    return f"{seconds * 1e3:8.2f} ms"


def bench_sizes(
    sizes: Iterable[int], repeat: int, old_shingle_limit: int
) -> dict[tuple[int, str], tuple[float | None, float]]:
    """Prints the table; returns (old, new) seconds per (characters, step)."""
    measured: dict[tuple[int, str], tuple[float | None, float]] = {}
    print("\n1. time per step on real English (best of repeats; per MB shows linearity)")
    print(
        f"  {'size':>8}  {'step':<15} {'old':>11} {'new':>11}  {'new/old':>7}  {'new per MB':>10}"
    )
    for size in sizes:
        text = text_of(size)
        reps = repeat if size <= 1_000_000 else 1
        for step in ("clean_text", "content_digest", "shingle_hashes"):
            new = best_time(lambda s=step, t=text: STEPS["new"][s](t), reps)
            if step == "shingle_hashes" and size > old_shingle_limit:
                old_txt, ratio = "    skipped", "      -"
                measured[len(text), step] = (None, new)
            else:
                old = best_time(lambda s=step, t=text: STEPS["old"][s](t), reps)
                old_txt, ratio = fmt_time(old), f"{new / old:6.2f}x"
                measured[len(text), step] = (old, new)
            per_mb = new / (len(text) / 1e6)
            print(
                f"  {len(text) / 1e6:7.2f}M  {step:<15} {old_txt:>11} {fmt_time(new):>11}"
                f"  {ratio:>7}  {fmt_time(per_mb):>10}"
            )
    return measured


def shapes(kib: int) -> dict[str, str]:
    n = kib * 1024
    return {
        "'<p ' x N, no '>'": "<p " * (n // 3),
        "'<a' x N": "<a" * (n // 2),
        "'<!--' x N, unclosed": "<!--" * (n // 4),
        "<p>x</p> + '<p ' x N": "<p>x</p>" + "<p " * (n // 3),
        "<p>x</p> + '<a \"' x N": "<p>x</p>" + '<a "' * (n // 4),
        "'&lt;p ' x N in <p>": "<p>" + "&lt;p " * (n // 6) + "</p>",
        "'&lt;p ' x N, cleaned twice": "<p>" + "&lt;p " * (n // 6) + "</p>",
        "'&#' + N digits in <p>": "<p>x</p>&#" + "9" * n,
        "'&' + N letters": "&" + "a" * n,
    }


def bench_shapes(kib: int, repeat: int) -> dict[str, tuple[float | None, float]]:
    """Prints the table; returns (old, new) seconds per shape (old None: it raised)."""
    measured: dict[str, tuple[float | None, float]] = {}
    print(f"\n2. hostile shapes of ~{kib} KiB through clean_text + content_digest")
    print(f"  {'shape':<30} {'old':>11} {'new':>11}  {'old/new':>8}")
    for name, text in shapes(kib).items():
        twice = "twice" in name

        def run(impl: str, text: str = text, twice: bool = twice) -> None:
            clean = STEPS[impl]["clean_text"]
            cleaned = clean(text)
            if twice:
                cleaned = clean(cleaned)  # type: ignore[arg-type]
            STEPS[impl]["content_digest"](cleaned)  # type: ignore[arg-type]

        try:
            old: float | None = best_time(lambda: run("old"), 1)
        except ValueError as exc:  # e.g. int() of thousands of digits
            old, error = None, type(exc).__name__
        new = best_time(lambda: run("new"), repeat)
        old_txt = fmt_time(old) if old is not None else f"{error:>11}"
        ratio = f"{old / new:7.0f}x" if old is not None else "       -"
        print(f"  {name:<30} {old_txt:>11} {fmt_time(new):>11}  {ratio}")
        measured[name] = (old, new)
    return measured


def _child(impl: str, step: str, chars: int) -> None:
    text = text_of(chars)
    if step != "none":
        STEPS[impl][step](text)
    # VmHWM is this process's own peak (ru_maxrss would include the parent's
    # peak at fork time); getrusage where /proc is missing.
    try:
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(peak)


def child_peak(impl: str, step: str, chars: int) -> int:
    out = subprocess.run(
        [sys.executable, __file__, "--child", impl, step, str(chars)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.split()[-1])


def bench_memory(chars: int) -> None:
    print(
        f"\n3. peak RSS of one step on {chars / 1e6:.0f}M characters of English (child processes)"
    )
    base = child_peak("new", "none", chars)
    size = sys.getsizeof(text_of(chars)) / 2**20
    print(f"  a child that only builds the text: {base / 1024:.0f} MiB (the text: {size:.0f} MiB)")
    print(f"  {'step':<15} {'old extra':>10} {'new extra':>10}")
    for step in ("clean_text", "content_digest", "shingle_hashes"):
        new = (child_peak("new", step, chars) - base) / 1024
        old = (child_peak("old", step, chars) - base) / 1024
        print(f"  {step:<15} {old:7.0f} MiB {new:7.0f} MiB")
    result = len(new_shingles.shingle_hashes(text_of(chars))) * 8 / 2**20
    print(f"  (shingle_hashes returns {result:.0f} MiB of hashes: the floor of its extra memory)")


def documents(words_per_doc: int = 1000) -> list[str]:
    words = english().split()
    return [
        " ".join(words[i : i + words_per_doc])
        for i in range(0, len(words) - words_per_doc + 1, words_per_doc)
    ]


def chinese_documents(count: int, chars: int = 1500) -> list[str]:
    rng = np.random.default_rng(7)
    # Frequent ideographs and the full stop: a stand-in for real prose.
    alphabet = [chr(c) for c in range(0x4E00, 0x4E00 + 2000)] + ["\u3002", "\uff0c"]
    return ["".join(rng.choice(alphabet, size=chars).tolist()) for _ in range(count)]


def smart_quotes(text: str) -> str:
    """*text* as a word processor types it: curly quotes, apostrophes and
    ellipses (General Punctuation, so the text is not Latin-1; an ellipsis
    changes under NFKC)."""
    text = re.sub(r'"([^"]*)"', "\u201c\\1\u201d", text.replace("...", "\u2026"))
    return text.replace("'", "\u2019")


def latin1(text: str) -> str:
    """*text* with the Latin-1 an editor adds: accented capitals, no-break
    spaces, a middle dot between sentences."""
    text = text.replace(". ", ". \u00b7 ", 5).replace(" a ", " a\u00a0", 20)
    return re.sub(r"\be", "\u00c9", text, count=20)


def bench_normalized_once(inputs: dict[str, list[str]], repeat: int) -> None:
    """The content stage's digest and MinHash shingles of one text: each
    normalizing it (``content_digest`` and ``MinHashMethod.shingles``), and both
    from one :class:`NormalizedText` (issue 25)."""
    from scrapy_dedup.text.near import MinHashMethod

    method = MinHashMethod()
    shared = new_shingles.NormalizedText

    def separate(text: str) -> object:
        return new_clean.content_digest(text), method.shingles(text)

    def once(text: str) -> object:
        normalized = shared(text)
        return new_clean.content_digest(normalized), method.shingles_of(normalized)

    print("\n   digest + padded shingles of one document: each normalizing, or one NormalizedText")
    print(f"  {'input':<44} {'separate us':>12} {'once us':>8}  {'once/sep':>8}")
    for name, texts in inputs.items():
        times: dict[str, float] = {}
        for _ in range(2):  # interleaved, best of both rounds
            for label, func in (("separate", separate), ("once", once)):
                t = best_time(lambda f=func, ts=texts: [f(d) for d in ts], repeat) / len(texts)
                times[label] = min(times.get(label, t), t)
        print(
            f"  {name:<44} {times['separate'] * 1e6:12.1f} {times['once'] * 1e6:8.1f}"
            f"  {times['once'] / times['separate']:7.2f}x"
        )


def bench_english_shingles(repeat: int) -> None:
    docs = documents()
    smart = [smart_quotes(doc) for doc in docs]
    inputs = {
        "as is": docs,
        "padded as MinHashMethod.fingerprint does": [f"{_PAD[0]}{d}{_PAD[1]}" for d in docs],
        "smart quotes and \u2026 (not Latin-1)": smart,
        "smart quotes, padded": [f"{_PAD[0]}{d}{_PAD[1]}" for d in smart],
    }
    print(
        f"\n4. shingle_hashes and content_digest per 1000-word English document ({len(docs)} docs)"
    )
    print(f"  {'step':<15} {'input':<42} {'old us':>8} {'new us':>8}  {'new/old':>7}")
    for step in ("shingle_hashes", "content_digest"):
        for name, texts in inputs.items():
            if step == "content_digest" and "padded" in name:
                continue  # the digest is of the text itself
            for impl in ("old", "new"):
                STEPS[impl][step](texts[0])  # warm the power tables
            times = {}
            for _ in range(2):  # interleaved, best of both rounds
                for impl in ("old", "new"):
                    func = STEPS[impl][step]
                    t = best_time(lambda f=func, ts=texts: [f(d) for d in ts], repeat) / len(texts)
                    times[impl] = min(times.get(impl, t), t)
            ratio = times["new"] / times["old"]
            print(
                f"  {step:<15} {name:<42} {times['old'] * 1e6:8.1f} {times['new'] * 1e6:8.1f}"
                f"  {ratio:6.2f}x"
            )
    bench_normalized_once(
        {
            "ASCII": docs,
            "Latin-1 (\u00c9, no-break spaces, \u00b7)": [latin1(d) for d in docs],
            "smart quotes and \u2026": smart,
            "a combining accent (the general path)": [d.replace("e", "e\u0301", 3) for d in docs],
            "Greek": [d.replace("e", "\u03b5").replace("a", "\u0391") for d in docs],
        },
        repeat,
    )
    zh = chinese_documents(len(docs))
    for impl in ("old", "new"):
        func = STEPS[impl]["shingle_hashes"]
        t = best_time(lambda f=func: [f(d) for d in zh], repeat) / len(zh)
        shingles = len(func(zh[0]))  # type: ignore[arg-type]
        print(f"  Chinese, 1500 characters, {impl}: {t * 1e6:8.1f} us, {shingles} shingle(s)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small shapes, no memory children")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.child:
        impl, step, chars = args.child
        _child(impl, step, int(chars))
        return
    print(
        f"Python {sys.version.split()[0]}, numpy {np.__version__}, {platform.machine()}; "
        f"TEXT_VERSION {new_clean.TEXT_VERSION}"
    )
    start = time.perf_counter()
    big = [1_000, 100_000, 5_000_000, 10_000_000, 50_000_000]
    steps = bench_sizes(big[:3] if args.quick else big, args.repeat, old_shingle_limit=10_000_000)
    shaped = bench_shapes(32 if args.quick else 187, args.repeat)
    if args.json:
        from _results import Results

        results = Results("bench_text", sys.argv[1:] if argv is None else argv)
        for step in ("clean_text", "content_digest", "shingle_hashes"):
            # the largest text the previous code was run on
            size, (old, new) = max(
                (
                    (chars, pair)
                    for (chars, name), pair in steps.items()
                    if name == step and pair[0]
                ),
                key=lambda found: found[0],
            )
            results.add(
                f"{step} on {size / 1e6:.1f} MB of English, vs the previous code",
                new * 1e3,
                (old or 0) * 1e3,
                unit="ms",
            )
        name, (old, new) = max(shaped.items(), key=lambda kv: kv[1][1])
        results.add(
            f"clean_text + content_digest, slowest hostile shape ({name}), vs the previous code",
            new * 1e3,
            old * 1e3 if old is not None else None,
            unit="ms",
        )
        results.write(args.json)
    if not args.quick:
        bench_memory(50_000_000)
    bench_english_shingles(args.repeat)
    print(f"\n(wall {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
