"""Host template discounting for MinHash near duplicates. No Scrapy import.

Pages of one host share a template (navigation, a filter form, a footer, "last
modified by"): two short pages that differ only in their own few words can
have a whole-text Jaccard similarity above the threshold. This module learns,
per host, which shingles are the template, and confirms a candidate found on
the whole text only if the text's *distinctive* part is in the candidate too.

Nothing new is stored per text. A signature's fine bins hold the 2 low bits
of the least shingle hash of each 512th of the hash space
(:mod:`~scrapy_dedup.text.minhash`); for the new text we know the full hash
of each bin's least shingle, so we know which bins are held by a distinctive
shingle. In such a bin a kept text holds the same value when it has that
shingle too (and no smaller one of its own there), else the same 2 bits by
chance, one time in four. The share of equal bins there, corrected for
chance, estimates how much of the new text's own part the kept text has:
fingerprints stored by any earlier run (same method) compare as they are.

The template is learned from every text of a host compared for near
duplicates, kept or dropped (pages that share only a template would
otherwise never be kept to learn it from), each distinct text once (copies
of a dropped page are not exact duplicates of a kept text, and counted each
time they would make that page's text the template): each shingle hash
counts once per page in a small count-min table (2 rows of 2**16 one-byte counters, 128 KiB
per host, at most :data:`MAX_HOSTS` hosts, the least recently seen
forgotten). A shingle is template once it was on :data:`TEMPLATE_PAGES`
pages of the host. Counts are halved every :data:`HALF_LIFE` pages, and
whenever a row has taken as many counts as it has counters (about 30 pages
of 2,000 words, 200 of 300), so the template follows the recent pages and
collisions stay rare (a counter's mean stays under 1). Count-min only
overcounts: a distinctive shingle may be taken for template (one bin fewer
to compare), never the other way round.

>>> model = TemplateModel()
>>> from scrapy_dedup.text.shingles import shingle_hashes
>>> form = " ".join(f"filter{i} field{i} value{i}" for i in range(40))
>>> own = lambda n: " ".join(f"word{n}x{k}" for k in range(15))
>>> pages = [shingle_hashes(f"{form} {own(n)}") for n in range(12)]
>>> for hashes in pages[:10]:
...     model.learn("trac.example", hashes)
>>> from scrapy_dedup.text.minhash import jaccard_estimate, signature
>>> a, b = signature(pages[10]), signature(pages[11])
>>> jaccard_estimate(a, b) > 0.75  # the form dominates both
True
>>> text = model.text("trac.example", pages[10])
>>> bool(text.confirms(b.sketch)[0]), bool(text.confirms(a.sketch)[0])
(False, True)
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import numpy.typing as npt

from scrapy_dedup.text.minhash import SKETCH_BINS, SKETCH_BYTES

__all__ = [
    "CONFIRM_SIMILARITY",
    "HALF_LIFE",
    "MAX_HOSTS",
    "RECENT_TEXTS",
    "TEMPLATE_PAGES",
    "HostTemplate",
    "TemplateModel",
    "TextTemplate",
    "bin_minima",
]

#: A shingle is template once it was on this many pages of the host (a
#: filter form, a footer, a "last modified" line). Two copies of a page do
#: not make a template; a third view of it may (then kept, not lost).
TEMPLATE_PAGES = 3
#: Counts are halved every this many pages of a host.
HALF_LIFE = 255
#: Hosts whose template is held at once (128 KiB each).
MAX_HOSTS = 16
#: The texts a host's template remembers having learned (~100 B each).
RECENT_TEXTS = 2048
#: The share of a text's distinctive part a candidate must have.
CONFIRM_SIMILARITY = 0.5
#: Equal bins of the distinctive part must be this unlikely by chance alone
#: (so a page whose own part is 1-4 words is never a near duplicate of a
#: page that merely shares its template: only an exact copy is dropped).
CHANCE_LEVEL = 1e-3

_WIDTH = 1 << 16
_FINE_BITS = 9  # log2(SKETCH_BINS), as in minhash
_EMPTY = np.iinfo(np.uint64).max
_CHANCE = 0.25
_LANE_SHIFTS = (2 * (np.arange(SKETCH_BINS) & 3)).astype(np.uint8)


def bin_minima(hashes: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """The least hash of each of the 512 fine bins a signature is made of
    (all ones where a bin is empty), before densification.

    >>> m = bin_minima(np.array([1, 5, 2**63 + 7], dtype=np.uint64))
    >>> int(m[0]), int(m[256]), int((m != np.iinfo(np.uint64).max).sum())
    (1, 9223372036854775815, 2)
    """
    h = np.asarray(hashes, dtype=np.uint64)
    fine = np.full(SKETCH_BINS, _EMPTY, dtype=np.uint64)
    if len(h):
        np.minimum.at(fine, (h >> np.uint64(64 - _FINE_BITS)).astype(np.intp), h)
    return fine


def _slots(values: npt.NDArray[np.uint64]) -> tuple[np.ndarray, np.ndarray]:
    """Two count-min columns per hash: its low two 16-bit words (the bin is
    chosen by the top bits), as contiguous indices (the fastest to scatter)."""
    words = np.ascontiguousarray(values, dtype="<u8").view("<u2").reshape(-1, 4)
    return words[:, 0].astype(np.intp), words[:, 1].astype(np.intp)


class HostTemplate:
    """The template of one host: how many of its pages had each shingle
    (count-min, 2 x 2**16 saturating bytes)."""

    __slots__ = ("added", "counts", "pages", "texts")

    def __init__(self) -> None:
        self.counts = np.zeros((2, _WIDTH), dtype=np.uint8)
        self.pages = 0  # kept pages learned from since the last halving
        self.added = 0  # counter increments since the last halving (the noise)
        #: The texts learned lately (8 bytes of their digest): a text counts once.
        self.texts: dict[int, None] = {}

    def learn(self, values: npt.NDArray[np.uint64], digest: bytes | None = None) -> None:
        """Count the shingle hashes of one page (each once). A text of
        ``digest`` learned lately is not counted again: copies of one page's
        text (dropped, so never an exact duplicate of a kept text) would
        otherwise make that text the template, and its next near copy, whose
        own part is then only its edit, would be kept."""
        if not len(values):
            return
        if digest is not None:
            texts, key = self.texts, int.from_bytes(digest[:8], "little")
            if key in texts:
                return
            texts[key] = None
            if len(texts) > RECENT_TEXTS:
                del texts[next(iter(texts))]
        # A repeated column counts once. No overflow: a count grows by one a
        # page, and counts are halved before HALF_LIFE pages pass.
        low, high = _slots(values)
        self.counts[0][low] += 1
        self.counts[1][high] += 1
        self.added += len(values)
        self.pages += 1
        if self.pages >= HALF_LIFE or self.added >= _WIDTH:
            self.counts >>= 1
            self.pages >>= 1
            self.added >>= 1

    def bar(self) -> int:
        """The count from which a shingle is template: :data:`TEMPLATE_PAGES`,
        or three times a counter's mean when the table is crowded."""
        return max(TEMPLATE_PAGES, math.ceil(3 * self.added / _WIDTH))

    def is_template(self, values: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
        """Whether each hash is a template shingle of this host."""
        low, mid = _slots(values)
        least = np.minimum(self.counts[0][low], self.counts[1][mid])
        found: npt.NDArray[np.bool_] = least >= self.bar()
        return found


class TextTemplate:
    """A text's distinctive bins against its host's template, and the test a
    candidate's sketch must pass: computed on the first candidate only (most
    texts meet none)."""

    __slots__ = ("_bins", "_host", "_lanes", "_own", "hashes", "rejected")

    def __init__(self, host: HostTemplate, hashes: npt.NDArray[np.uint64]) -> None:
        self._host = host
        self.hashes = hashes
        self._bins: npt.NDArray[np.intp] | None = None
        self._lanes: npt.NDArray[np.uint8] = np.empty(0, dtype=np.uint8)
        self._own = True  # whether any shingle of the text is not template
        #: Candidates :meth:`confirms` turned down (they shared the template only).
        self.rejected = 0

    def _distinctive(self) -> npt.NDArray[np.intp]:
        bins = self._bins
        if bins is None:
            minima = bin_minima(self.hashes)
            filled = np.flatnonzero(minima != _EMPTY)
            own = filled[~self._host.is_template(minima[filled])]
            if not len(own):  # no bin's least shingle is its own: has it any?
                self._own = not self._host.is_template(self.hashes).all()
            self._lanes = (minima[own] & np.uint64(3)).astype(np.uint8)
            bins = self._bins = own
        return bins

    def distinctive_bins(self) -> int:
        """How many bins a distinctive shingle of the text holds."""
        return len(self._distinctive())

    def _equal(self, sketches: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Per candidate sketch, the distinctive bins holding the text's value."""
        bins = self._distinctive()
        rows = np.asarray(sketches, dtype=np.uint8).reshape(-1, SKETCH_BYTES)
        lanes = (rows[:, bins >> 2] >> _LANE_SHIFTS[bins]) & np.uint8(3)
        equal: npt.NDArray[np.int64] = (lanes == self._lanes).sum(axis=1, dtype=np.int64)
        return equal

    def similarity(self, sketches: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The estimated share of the text's distinctive part each candidate
        sketch (a row of ``(n, 128)`` uint8) has; 1.0 for a text that is all template."""
        n = len(self._distinctive())
        equal = self._equal(sketches)
        if n == 0:
            return np.ones(len(equal))
        share: npt.NDArray[np.float64] = np.maximum((equal / n - _CHANCE) / (1.0 - _CHANCE), 0.0)
        return share

    def confirms(self, sketches: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Which candidate sketches have the text's distinctive part: an
        estimated share of at least :data:`CONFIRM_SIMILARITY`, with more equal
        bins than chance gives at :data:`CHANCE_LEVEL`. A text that is all
        template (its whole text already matched) is confirmed; one whose own
        shingles hold no bin (a few words beside a large template) is not:
        nothing tells whether a candidate has them."""
        n = len(self._distinctive())
        equal = self._equal(sketches)
        if n == 0:
            ok: npt.NDArray[np.bool_] = np.full(len(equal), not self._own, dtype=bool)
        else:
            share = (equal / n - _CHANCE) / (1.0 - _CHANCE)
            ok = (share >= CONFIRM_SIMILARITY) & (equal >= _needed(n))
        self.rejected += int(len(ok) - np.count_nonzero(ok))
        return ok


_NEEDED: dict[int, int] = {}


def _needed(n: int) -> int:
    """The fewest equal bins of ``n`` that chance (1/4 each) reaches with
    probability at most :data:`CHANCE_LEVEL`; ``n + 1`` when none does.

    >>> _needed(1), _needed(4), _needed(5), _needed(10), _needed(40)
    (2, 5, 5, 8, 20)
    """
    found = _NEEDED.get(n)
    if found is None:
        tail, found = 0.0, n + 1
        for m in range(n, -1, -1):
            tail += math.comb(n, m) * _CHANCE**m * (1.0 - _CHANCE) ** (n - m)
            if tail > CHANCE_LEVEL:
                break
            found = m
        _NEEDED[n] = found
    return found


class TemplateModel:
    """The templates of the hosts seen lately (at most :data:`MAX_HOSTS`, the
    least recently used forgotten: a forgotten host is learned again)."""

    def __init__(self, max_hosts: int = MAX_HOSTS) -> None:
        self.max_hosts = max_hosts
        self._hosts: OrderedDict[str, HostTemplate] = OrderedDict()

    def __len__(self) -> int:
        return len(self._hosts)

    def host(self, name: str) -> HostTemplate:
        """The template of host ``name`` (empty when new)."""
        hosts = self._hosts
        found = hosts.get(name)
        if found is None:
            found = hosts[name] = HostTemplate()
            if len(hosts) > self.max_hosts:
                hosts.popitem(last=False)
        else:
            hosts.move_to_end(name)
        return found

    def text(self, name: str, hashes: npt.NDArray[np.uint64]) -> TextTemplate:
        """The text's view of host ``name``'s template, for :meth:`TextTemplate.confirms`."""
        return TextTemplate(self.host(name), hashes)

    def learn(
        self, name: str, hashes: npt.NDArray[np.uint64], digest: bytes | None = None
    ) -> None:
        """Learn from a text of host ``name`` (once per ``digest``)."""
        self.host(name).learn(np.asarray(hashes, dtype=np.uint64), digest)

    def nbytes(self) -> int:
        """Bytes of the count tables held."""
        return sum(int(h.counts.nbytes) for h in self._hosts.values())
