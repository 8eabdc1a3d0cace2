"""CompactMap against a plain dict: the same answers whenever its buffers are
merged and its shards split."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scrapy_dedup.stores.compact import _SLOT_SHIFT, _SLOTS, CompactMap

TOP = 2**64 - 1


class TinyMap(CompactMap):
    """Merges every 2 new keys of a shard, splits shards above 8 entries."""

    _MIN_BUFFER = 2
    _SPLIT = 8


class SmallMap(CompactMap):
    _MIN_BUFFER = 5
    _SPLIT = 40


class LazyMap(CompactMap):
    """Never merges (the buffers hold everything) unless update() is called."""

    _MIN_BUFFER = 10**9


MAPS = [CompactMap, TinyMap, SmallMap, LazyMap]


def check_layout(m: CompactMap) -> None:
    """The directory covers the key space with shards in order, each with
    sorted keys that belong to its slots, and nothing both merged and buffered."""
    slot = 0
    for shard in m._shards():
        assert shard.lo == slot < shard.hi
        assert all(m._slots[i] is shard for i in range(shard.lo, shard.hi))
        keys = shard.keys.tolist()
        assert keys == sorted(set(keys))
        assert len(shard.values) == len(keys)
        for key in [*keys, *shard.buffer]:
            assert shard.lo <= key >> _SLOT_SHIFT < shard.hi
        assert not set(keys) & set(shard.buffer)
        assert shard.new_keys.tolist() == list(shard.buffer)
        assert shard.new_values.tolist() == list(shard.buffer.values())
        slot = shard.hi
    assert slot == _SLOTS


def check_same(m: CompactMap, d: dict[int, int]) -> None:
    assert len(m) == len(d)
    for key, value in d.items():
        assert m.get(key) == value
        assert key in m
    merged = sum(len(shard.keys) for shard in m._shards())
    assert m.nbytes() == 16 * merged <= 16 * len(d)
    check_layout(m)


def random_key(rng: random.Random, pool: list[int]) -> int:
    roll = rng.random()
    if roll < 0.35 and pool:
        return rng.choice(pool)  # a repeat
    if roll < 0.45:
        return rng.choice([0, 1, TOP, TOP - 1, 1 << 63, (1 << 52) - 1, 1 << 52])
    if roll < 0.65:  # crowded into a few slots: shards there split, down to one slot
        return (rng.choice([0, 7, 4095]) << _SLOT_SHIFT) | rng.getrandbits(_SLOT_SHIFT)
    key = rng.getrandbits(64)
    pool.append(key)
    return key


def play(cls: type[CompactMap], seed: int, steps: int = 3000) -> list[object]:
    """Random operations on ``cls()`` and a dict; returns every answer."""
    rng = random.Random(seed)
    m, d, pool = cls(), dict[int, int](), list[int]()
    answers: list[object] = []
    for step in range(steps):
        op = rng.random()
        if op < 0.6:
            key, value = random_key(rng, pool), rng.choice([0, 1, 2**40 + step, TOP])
            expected = d.get(key)
            d.setdefault(key, value)
            answer: object = m.setdefault(key, value)
            assert answer == expected
        elif op < 0.85:
            key = random_key(rng, pool)
            answer = (m.get(key), key in m)
            assert answer == (d.get(key), key in d)
        elif op < 0.97:
            size = rng.choice([0, 1, 5, 50, 300])
            keys = [random_key(rng, pool) for _ in range(size)]
            values = [rng.getrandbits(64) for _ in range(size)]
            for key, value in zip(keys, values, strict=True):
                d.setdefault(key, value)  # the map's entries win, then the first
            m.update(np.array(keys, dtype=np.uint64), np.array(values, dtype=np.uint64))
            answer = len(m)
            assert m.nbytes() == 16 * len(m)  # update() leaves nothing buffered
        elif op < 0.99:
            answer = (len(m), m.nbytes() <= 16 * len(m))
            assert len(m) == len(d)
        else:
            m.clear()
            d.clear()
            answer = len(m)
        answers.append(answer)
        if step % 500 == 0:
            check_same(m, d)
    check_same(m, d)
    return answers


@pytest.mark.parametrize("cls", MAPS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", range(4))
def test_matches_a_dict_under_random_operations(cls: type[CompactMap], seed: int) -> None:
    play(cls, seed)


@pytest.mark.parametrize("seed", range(3))
def test_answers_do_not_depend_on_when_merges_happen(seed: int) -> None:
    answers = [play(cls, seed, steps=1500) for cls in MAPS]
    assert all(a == answers[0] for a in answers[1:])


@pytest.mark.parametrize("cls", MAPS, ids=lambda c: c.__name__)
def test_many_keys_split_the_shards(cls: type[CompactMap]) -> None:
    rng = random.Random(5)
    m, d = cls(), dict[int, int]()
    for _ in range(20_000):
        key, value = rng.getrandbits(64), rng.getrandbits(64)
        assert m.setdefault(key, value) == d.get(key)
        d.setdefault(key, value)
    check_same(m, d)
    shards = m._shards()
    if cls is LazyMap:
        assert len(shards) == 1 and m.nbytes() == 0
    else:  # uniform keys: shards of a few slots hold at most about _SPLIT keys
        assert len(shards) >= 20_000 / (2 * cls._SPLIT)
        assert all(len(s.keys) <= 2 * cls._SPLIT for s in shards if s.hi - s.lo > 1)


@pytest.mark.parametrize("cls", MAPS, ids=lambda c: c.__name__)
def test_edge_keys_and_values(cls: type[CompactMap]) -> None:
    m = cls()
    assert m.setdefault(0, 0) is None
    assert m.setdefault(TOP, TOP) is None
    assert m.setdefault(0, 5) == 0  # a stored 0 is a value, not "missing"
    assert m.setdefault(TOP, 5) == TOP
    m.update(np.array([0, TOP, 3], dtype=np.uint64), np.array([9, 9, 9], dtype=np.uint64))
    assert (m.get(0), m.get(TOP), m.get(3), len(m)) == (0, TOP, 9, 3)
    assert m.setdefault(0, 1) == 0 and m.setdefault(TOP, 1) == TOP
    for outside in (-1, 2**64, 2**70):
        assert m.get(outside) is None
        assert outside not in m
        with pytest.raises(OverflowError):
            m.setdefault(outside, 1)
    for value in (-1, 2**64):
        with pytest.raises(OverflowError):
            m.setdefault(4, value)
    assert 4 not in m
    assert len(m) == 3
    check_layout(m)


@pytest.mark.parametrize("cls", MAPS, ids=lambda c: c.__name__)
def test_update_first_value_wins(cls: type[CompactMap]) -> None:
    m = cls()
    m.setdefault(1, 100)  # buffered (or merged): wins over the update
    m.update(np.array([2, 1, 2, 3], dtype=np.uint64), np.array([20, 10, 21, 30], dtype=np.uint64))
    assert [m.get(k) for k in (1, 2, 3)] == [100, 20, 30]
    m.update(np.array([3, 4, 4], dtype=np.uint64), np.array([31, 40, 41], dtype=np.uint64))
    assert [m.get(k) for k in (1, 2, 3, 4)] == [100, 20, 30, 40]
    assert len(m) == 4 and m.nbytes() == 64
    m.update(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64))
    assert len(m) == 4
    check_layout(m)


def test_update_takes_int64_views_as_sqlite_loads_them() -> None:
    table = np.array([[-1, 5], [7, -2], [-1, 6]], dtype=np.int64)
    m = CompactMap()
    m.update(table[:, 0].view(np.uint64), table[:, 1].view(np.uint64))
    assert (m.get(TOP), m.get(7), len(m)) == (5, 2**64 - 2, 2)


@pytest.mark.parametrize("cls", [CompactMap, SmallMap], ids=lambda c: c.__name__)
def test_bulk_load_then_inserts(cls: type[CompactMap]) -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, TOP, 50_000, dtype=np.uint64, endpoint=True)
    keys[-100:] = keys[:100]  # repeats inside the batch: the first value wins
    values = np.arange(len(keys), dtype=np.uint64)
    m = cls()
    m.update(keys, values)
    d: dict[int, int] = {}
    for key, value in zip(keys.tolist(), values.tolist(), strict=True):
        d.setdefault(key, value)
    check_same(m, d)
    assert max(len(shard.keys) for shard in m._shards()) <= cls._SPLIT
    extra = random.Random(4)
    for _ in range(5000):
        key = extra.choice([extra.getrandbits(64), int(keys[extra.randrange(len(keys))])])
        assert m.setdefault(key, 7) == d.get(key)
        d.setdefault(key, 7)
    check_same(m, d)


def test_one_crowded_slot_grows_as_one_shard() -> None:
    m, d = TinyMap(), {}
    for i in range(300):
        key = (9 << _SLOT_SHIFT) | (i * 7919)
        m.setdefault(key, i)
        d[key] = i
    check_same(m, d)
    assert m._slots[9].hi - m._slots[9].lo == 1
    assert len(m._slots[9].keys) + len(m._slots[9].buffer) == 300


def test_clear() -> None:
    m = SmallMap()
    for key in range(0, 2**64 - 1, 2**50):
        m.setdefault(key, 1)
    m.clear()
    assert len(m) == 0 and m.nbytes() == 0 and m.get(0) is None
    assert len(m._shards()) == 1
    assert m.setdefault(0, 2) is None and m.get(0) == 2
