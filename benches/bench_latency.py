"""Per-call latency of the URL map: CompactMap before and after sharding.

Run from the repository root::

    python benches/bench_latency.py                 # 10M keys, then 1M: about 2.5 minutes
    python benches/bench_latency.py --sizes 1000000 # 1M only, about 20 s
    python benches/bench_latency.py --sizes 200000 --anchor-max 200000   # quick look

For each size N, N random 64-bit keys (synthetic; keys are hashes, so uniform)
are inserted, each once, through:

* ``old``: ``CompactMap`` as it was before sharding (copied below, the anchor):
  one pair of sorted arrays plus a dict buffer merged in one step;
* ``new``: ``scrapy_dedup.stores.CompactMap``;
* ``store``: the path ``request_seen`` takes in a crawl with the memory store,
  ``GuardedStore(MemoryStore()).add_url(key, info)``, on the new map (for
  N up to ``--store-max``, default 1M);
* ``RFPDupeFilter``: Scrapy's ``request_seen`` with a fingerprinter that
  returns a precomputed 20-byte digest, so that only its set is timed, as only
  the map is timed on our side (computing keys is measured in
  ``bench_url_stage.py``). Capped at ``--anchor-max`` keys (default 10M).

Then R = N / 10 keys already present are offered again (a duplicate request).
Every call is timed alone with ``time.perf_counter_ns`` (about 60 ns of the
figures are that clock). The latency table gives p50, p99, p99.9, max, the
mean and the number of calls above 2 ms and 5 ms. The cyclic GC stays on (as
in a crawl) but the bench's own inputs are frozen out of it (``gc.freeze``).

Bytes per key: what each structure holds after the N inserts (numpy arrays,
dict buffers with their int objects, per-shard objects; for Scrapy, the set and
its ``bytes`` digests), counted with ``sys.getsizeof`` rounded up to 16 bytes
as pymalloc allocates, and the largest such figure seen at 8 checkpoints in
the second half of the inserts (the dict buffers fill and empty). The
``tracemalloc`` figure of ``bench_url_stage.py`` agrees within a few percent.

On a shared machine a descheduled process shows up as a max of several ms on
any side: compare ``max`` with the count of calls above 2 ms, and run twice.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import sys
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import scrapy
from scrapy.dupefilters import RFPDupeFilter

from scrapy_dedup.stores import CompactMap
from scrapy_dedup.stores.guarded import GuardedStore
from scrapy_dedup.stores.memory import MemoryStore

# --- The anchor: CompactMap before sharding, copied verbatim ---------------------


class OldCompactMap:
    """A map from uint64 to uint64 in about 16-30 bytes per entry.

    Python's ``set`` of 20-byte digests (Scrapy's ``RFPDupeFilter``) costs
    about 133 bytes per entry. Here most entries sit in two sorted numpy
    arrays searched with :func:`bisect.bisect_left`; recent ones wait in a
    small dict that is merged in once it reaches an eighth of the arrays.
    """

    _MIN_BUFFER = 4096

    def __init__(self) -> None:
        self._keys = np.empty(0, dtype=np.uint64)
        self._values = np.empty(0, dtype=np.uint64)
        self._key_view = self._keys.data
        self._value_view = self._values.data
        self._buffer: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._keys) + len(self._buffer)

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def get(self, key: int) -> int | None:
        value = self._buffer.get(key)
        if value is not None:
            return value
        keys = self._key_view
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return int(self._value_view[i])
        return None

    def setdefault(self, key: int, value: int) -> int | None:
        """Record ``value`` for a new ``key`` and return ``None``; for a known
        key change nothing and return its first value."""
        existing = self.get(key)
        if existing is not None:
            return existing
        self._buffer[key] = value
        if len(self._buffer) >= max(self._MIN_BUFFER, len(self._keys) >> 3):
            self._merge()
        return None

    def update(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Bulk-load pairs; for a repeated key the first value wins."""
        self._merge()
        keys = np.concatenate([self._keys, keys.astype(np.uint64)])
        values = np.concatenate([self._values, values.astype(np.uint64)])
        keys, first = np.unique(keys, return_index=True)  # first occurrence of each
        self._set_arrays(keys, values[first])

    def clear(self) -> None:
        self._buffer.clear()
        self._set_arrays(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64))

    def _merge(self) -> None:
        if not self._buffer:
            return
        new_keys = np.fromiter(self._buffer.keys(), dtype=np.uint64, count=len(self._buffer))
        new_values = np.fromiter(self._buffer.values(), dtype=np.uint64, count=len(self._buffer))
        order = np.argsort(new_keys)
        new_keys, new_values = new_keys[order], new_values[order]
        at = np.searchsorted(self._keys, new_keys)
        self._set_arrays(
            np.insert(self._keys, at, new_keys), np.insert(self._values, at, new_values)
        )
        self._buffer.clear()

    def _set_arrays(self, keys: np.ndarray, values: np.ndarray) -> None:
        self._key_view.release()
        self._value_view.release()
        self._keys, self._values = keys, values
        self._key_view = self._keys.data
        self._value_view = self._values.data

    def nbytes(self) -> int:
        """Bytes held by the arrays (the dict buffer not counted)."""
        return int(self._keys.nbytes + self._values.nbytes)


# --- Memory accounting ------------------------------------------------------------


def _alloc(obj: object) -> int:
    """What pymalloc/malloc hands out for ``obj``: its size rounded up to 16."""
    return (sys.getsizeof(obj) + 15) & ~15


def _dict_bytes(buffer: dict[int, int]) -> int:
    """A dict buffer with the int objects only it holds (small ints are shared)."""
    ints = sum(_alloc(k) for k in buffer)
    ints += sum(_alloc(v) for v in buffer.values() if not -5 <= v <= 256)
    return _alloc(buffer) + ints


def _array_bytes(array_: np.ndarray) -> int:
    return _alloc(array_) + (0 if array_.base is None else array_.nbytes)


def held_bytes(structure: Any) -> int:
    """Bytes held by an old or new CompactMap, a MemoryStore's URL map or an
    RFPDupeFilter (its fingerprint set and digests)."""
    if isinstance(structure, GuardedStore):
        structure = structure.store
    if isinstance(structure, MemoryStore):
        structure = structure._urls
    if isinstance(structure, RFPDupeFilter):
        digests = structure._fingerprints
        digest = _alloc(b"x" * 20)  # all 20 bytes long
        return _alloc(digests) + digest * len(digests)
    if isinstance(structure, OldCompactMap):
        views = _alloc(structure._key_view) * 2
        return (
            _array_bytes(structure._keys)
            + _array_bytes(structure._values)
            + views
            + _dict_bytes(structure._buffer)
        )
    total = _alloc(structure._slots)
    for shard in structure._shards():
        total += _alloc(shard) + _array_bytes(shard.keys) + _array_bytes(shard.values)
        total += _alloc(shard.key_view) * 2 + _dict_bytes(shard.buffer)
        total += _alloc(shard.new_keys) + _alloc(shard.new_values)
    return int(total)


# --- The timed loops --------------------------------------------------------------


BLOCK = 64  # calls per CPU-time reading


def timed_calls(
    call: Callable[[Any, Any], Any], args: Sequence[Any], infos: Sequence[int], a: int, b: int
) -> tuple[np.ndarray, np.ndarray]:
    """Wall time in ns of each ``call(args[i], infos[i])`` for ``a <= i < b``,
    timed alone, and the thread's CPU time over each block of ``BLOCK`` calls
    (reading it costs about 0.7 µs here, too much for every call)."""
    clock, cpu_clock, n = time.perf_counter_ns, time.thread_time_ns, b - a
    wall = array("q", bytes(8 * n))
    cpu = array("q", bytes(8 * ((n + BLOCK - 1) // BLOCK)))
    for block, first in enumerate(range(a, b, BLOCK)):
        cpu_start = cpu_clock()
        for i in range(first, min(first + BLOCK, b)):
            arg, info = args[i], infos[i]
            start = clock()
            call(arg, info)
            wall[i - a] = clock() - start
        cpu[block] = cpu_clock() - cpu_start
    return np.frombuffer(wall, dtype=np.int64), np.frombuffer(cpu, dtype=np.int64)


def cpu_bound(wall: np.ndarray, block_cpu: np.ndarray) -> np.ndarray:
    """Per call, an upper bound of its CPU time: its wall time, or the CPU
    time of its whole block when that is less (the thread was descheduled)."""
    bound: np.ndarray = np.minimum(wall, np.repeat(block_cpu, BLOCK)[: len(wall)])
    return bound


class _Digest:
    """A fingerprinter whose "requests" are their own 20-byte digests."""

    @staticmethod
    def fingerprint(request: bytes) -> bytes:
        return request


def _rfp_seen(dupefilter: RFPDupeFilter) -> Callable[[bytes, int], bool]:
    seen = dupefilter.request_seen
    return lambda digest, _info: seen(digest)  # type: ignore[arg-type]


def _new_store() -> GuardedStore:
    return GuardedStore(
        MemoryStore(), "memory", "continue", count=lambda _: None, stop=lambda: None
    )


def run_one(
    name: str, n: int, keys: list[int], infos: list[int], digests: list[bytes] | None
) -> dict[str, Any]:
    """Insert ``n`` keys, then offer ``n // 10`` of them again."""
    structure: Any
    args: Sequence[Any] = digests if name == "rfp" and digests is not None else keys
    again = np.random.default_rng(n).integers(0, n, n // 10)
    repeat_args = [args[i] for i in again]
    repeat_infos = [infos[i] + 1 for i in again]
    # Lists the collector would walk at each collection, for nothing.
    gc.collect()
    gc.freeze()
    if name == "old":
        structure = OldCompactMap()
        call = structure.setdefault
    elif name == "new":
        structure = CompactMap()
        call = structure.setdefault
    elif name == "store":
        structure = _new_store()
        call = structure.add_url
    else:
        assert digests is not None
        structure = RFPDupeFilter(fingerprinter=_Digest())  # type: ignore[arg-type]
        call = _rfp_seen(structure)
    checkpoints = [n * k // 16 for k in range(8, 17)]
    walls, cpus, peak, at_end = [], [], 0.0, 0.0
    started = time.perf_counter()
    for a, b in pairwise([0, *checkpoints]):
        if b > a:
            wall, block_cpu = timed_calls(call, args, infos, a, b)
            walls.append(wall)
            cpus.append(cpu_bound(wall, block_cpu))
        size = held_bytes(structure) / max(b, 1)
        if b >= n // 2:
            peak = max(peak, size)
        at_end = size
    repeat_wall, repeat_cpu = timed_calls(call, repeat_args, repeat_infos, 0, len(again))
    seconds = time.perf_counter() - started
    if name == "rfp":
        count = len(structure._fingerprints)
    elif name == "store":
        count = structure.url_count()
    else:
        count = len(structure)
    assert count == n, (name, count, n)
    return {
        "inserts": (np.concatenate(walls), np.concatenate(cpus)),
        "repeats": (repeat_wall, cpu_bound(repeat_wall, repeat_cpu)),
        "bytes": at_end,
        "peak": peak,
        "seconds": seconds,
    }


# --- Report -----------------------------------------------------------------------

LABELS = {
    "old": "CompactMap before (anchor)",
    "new": "CompactMap now",
    "store": "memory store add_url (now)",
    "rfp": "Scrapy RFPDupeFilter",
}


def stats(wall: np.ndarray, cpu: np.ndarray) -> dict[str, float]:
    p50, p99, p999 = np.percentile(wall, [50, 99, 99.9])
    return {
        "p50": p50 / 1e3,
        "p99": p99 / 1e3,
        "p99.9": p999 / 1e3,
        "max": wall.max() / 1e3,
        "mean": wall.mean() / 1e3,
        ">2ms": float((wall > 2_000_000).sum()),
        ">5ms": float((wall > 5_000_000).sum()),
        "max cpu": cpu.max() / 1e3,
        "cpu>2ms": float((cpu > 2_000_000).sum()),
    }


def print_table(title: str, rows: dict[str, dict[str, float]]) -> None:
    print(f"\n  {title} (µs per call; wall time, then the CPU-time bound)")
    print(
        f"    {'':28} {'p50':>6} {'p99':>6} {'p99.9':>7} {'max':>9} {'mean':>6}"
        f" {'>2ms':>5} {'>5ms':>5} | {'max cpu':>8} {'>2ms':>5}"
    )
    for name, s in rows.items():
        print(
            f"    {LABELS[name]:28} {s['p50']:6.2f} {s['p99']:6.2f} {s['p99.9']:7.2f}"
            f" {s['max']:9.1f} {s['mean']:6.3f} {s['>2ms']:5.0f} {s['>5ms']:5.0f}"
            f" | {s['max cpu']:8.1f} {s['cpu>2ms']:5.0f}"
        )
    for other in ("old", "rfp"):
        if "new" in rows and other in rows:
            new, anchor = rows["new"], rows[other]
            ratios = "  ".join(
                f"{k} {new[k] / anchor[k]:.2f}x"
                for k in ("p50", "p99", "p99.9", "max", "mean", "max cpu")
            )
            print(f"    new / {other:4} {ratios}")


def bench_size(n: int, anchor_max: int, store_max: int, seed: int) -> dict[str, dict[str, Any]]:
    """Prints the tables; returns each structure's insert latencies and bytes per key."""
    rng = np.random.default_rng(seed)
    key_array = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    keys = key_array.tolist()
    # Info words as url_info() makes them: a 32-bit CRC above 16 bits of flags.
    infos = ((key_array >> np.uint64(32)) << np.uint64(16) | np.uint64(1)).tolist()
    del key_array
    names = ["old", "new"]
    if n <= store_max:
        names.append("store")
    digests = None
    if n <= anchor_max:
        data = rng.bytes(20 * n)
        digests = [data[i : i + 20] for i in range(0, 20 * n, 20)]
        del data
        names.append("rfp")
    gc.collect()
    gc.freeze()  # the inputs stay out of the collector's way
    results = {}
    for name in names:
        results[name] = run_one(name, n, keys, infos, digests)
        gc.collect()
        print(f"  ... {LABELS[name]}: {results[name]['seconds']:.1f} s", file=sys.stderr)
    gc.unfreeze()
    print(f"\nN = {n:,} keys inserted, then {n // 10:,} of them again")
    print_table(f"insert {n:,} new keys", {k: stats(*v["inserts"]) for k, v in results.items()})
    print_table(
        f"repeat {n // 10:,} known keys (a duplicate request)",
        {k: stats(*v["repeats"]) for k, v in results.items()},
    )
    print(f"\n  held bytes per key after {n:,} keys (peak over the second half)")
    for name, r in results.items():
        line = f"    {LABELS[name]:28} {r['bytes']:7.1f}  (peak {r['peak']:.1f})"
        if name != "old" and "old" in results:
            line += f"   {r['bytes'] / results['old']['bytes']:.2f}x old"
        if name != "rfp" and "rfp" in results:
            line += f"   {r['bytes'] / results['rfp']['bytes']:.2f}x RFPDupeFilter"
        print(line)
    if "store" not in results:
        print(f"    (memory store not run: N above --store-max {store_max:,})")
    if "rfp" not in results:
        print(f"    (RFPDupeFilter not run: N above --anchor-max {anchor_max:,})")
    return {
        name: {"insert": stats(*r["inserts"]), "bytes": r["bytes"]} for name, r in results.items()
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000000,1000000", help="comma-separated key counts")
    parser.add_argument(
        "--anchor-max", type=int, default=10_000_000, help="largest N run through RFPDupeFilter"
    )
    parser.add_argument(
        "--store-max", type=int, default=1_000_000, help="largest N run through the store"
    )
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    print("scrapy-dedup per-call latency benchmark (CompactMap)")
    print(f"  date      {datetime.date.today()}")
    print(f"  python    {platform.python_implementation()} {platform.python_version()}")
    print(f"  numpy     {np.__version__}, scrapy {scrapy.__version__}, cpus {os.cpu_count()}")
    print(f"  command   python benches/bench_latency.py {' '.join(sys.argv[1:])}".rstrip())
    started = time.perf_counter()
    measured = {}
    for size in (int(s.replace("_", "")) for s in args.sizes.split(",")):
        measured[size] = bench_size(size, args.anchor_max, args.store_max, args.seed)
    if args.json:
        from _results import Results

        out = Results("bench_latency", sys.argv[1:] if argv is None else argv)
        for size, res in measured.items():
            new = res["new"]
            for other, label in (("rfp", "RFPDupeFilter"), ("old", "CompactMap before")):
                if other not in res:
                    continue
                for stat in ("p99", "max"):
                    out.add(
                        f"insert {stat}, {size:,} keys, CompactMap vs {label}",
                        new["insert"][stat],
                        res[other]["insert"][stat],
                        unit="us",
                    )
            if "rfp" in res:
                out.add(
                    f"bytes per key, {size:,} keys, CompactMap vs RFPDupeFilter",
                    new["bytes"],
                    res["rfp"]["bytes"],
                    unit="B",
                    target="ratio <= 0.5",
                )
        out.write(args.json)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
