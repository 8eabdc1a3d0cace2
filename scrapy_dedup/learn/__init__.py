"""Learned URL rules: which differences between URLs of one host do not change
the page, learned from the pages the crawl fetched. No Scrapy import.

Evidence is pairs of fetched pages of one host whose visible text is the
same. Each pair proposes rules that would explain it:

- ``param``: a query parameter (any value, or one value) can be dropped
  (``?sid=…``, ``?view=print``);
- ``prefix``: the first path segments can be replaced (``/m/x`` = ``/x``,
  ``/shop/tools/x`` = ``/shop/*/x``, ``/shop/tools/x`` = ``/item/x``);
- ``suffix``: the last path segments can be replaced (``/x/amp`` = ``/x``);
- ``case``: the path is case-insensitive under its first segment.

A rule maps every URL to a *class* URL (the URL with the difference taken
out; never fetched). Every fetched page joins its class under each rule of
its host: a page whose text equals the text of the class's first page
supports the rule (when the rule is the one difference the adopted rules
leave between the two URLs), one whose text differs contradicts it. A rule is
adopted once ``min_support`` different classes with different texts (different
pages, not variants or copies of one) confirmed it, evidence rebuilt at every
adoption or contradiction and never counted twice, and contradicted nowhere
else than in one URL template (:func:`~scrapy_dedup.learn.scope.template`:
``/docs/*`` where a parameter matters, ``/forum/viewforum.php`` where ``?f``
is the page and ``/forum/viewtopic.php`` ignores it): there it is excluded.
A second contradicted template revokes it.

An adopted rule skips a new URL whose class (under all adopted rules of its
host) already holds a fetched page, in a template where a page confirmed it
(a rule reaches another template only with evidence there); one in
``1 / sample`` of those is fetched anyway, and its text checks the rule
again, as does :meth:`Learner.audit` when the crawl would end. A
contradiction is blamed on the newest rule family no page has proven yet,
else on the one with the least evidence. Every skipped request is kept; a
contradiction hands back the requests the rule skipped (in the excluded
template, or all of them when revoked) for the caller to fetch.
"""

from __future__ import annotations

from scrapy_dedup.learn.defer import Held
from scrapy_dedup.learn.evidence import (
    MIN_TEXT,
    body_digest,
    links_filter,
    main_region,
    page_digest,
    page_links,
    visible_text,
    within,
)
from scrapy_dedup.learn.learner import Learner
from scrapy_dedup.learn.rules import Rule, Skip
from scrapy_dedup.learn.rules import _explanations as _explanations  # for the tests
from scrapy_dedup.learn.scope import _split as _split  # for the tests
from scrapy_dedup.learn.trust import CanonicalTrust

__all__ = [
    "MIN_TEXT",
    "CanonicalTrust",
    "Held",
    "Learner",
    "Rule",
    "Skip",
    "body_digest",
    "links_filter",
    "main_region",
    "page_digest",
    "page_links",
    "visible_text",
    "within",
]
