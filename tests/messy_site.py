"""A messy two-host site whose duplication no fixed URL rule knows, with traps
where the same kind of difference matters (learned URL rules, issue 13).

``shop.test``: every link carries ``?sid=`` (8 characters, one value per
linking page); a product is at ``/item/<slug>`` and under two of three
categories (``/shop/<cat>/<slug>``), with a print view
(``/item/<slug>/print``); help topics answer in any case (``/Help/Returns`` =
``/help/returns``). Traps: ``?color=`` (on every fourth mug and shirt)
changes the text of shirts but not of mugs; with ``late_trap``,
``?edition=`` changes the text of the first half of the products (which a
depth-first crawl reaches last) and nothing for the others.

``wiki.test``: ``?v=`` (4 characters, as on news.test) names an old
revision of a page, with its own text: what news.test teaches about ``v``
must not skip these.

``news.test``: every link carries ``?v=`` (4 characters); a story is also at
``/story/<n>/amp`` and ``/m/story/<n>``. Trap: ``?lang=de`` translates the
docs (``/docs/<n>``) but not the blog (``/blog/<n>``).

:meth:`MessySite.page_id` names the real page a URL serves, so a test can
count fetches per real page and real pages never fetched.
"""

from __future__ import annotations

import hashlib
import random
from urllib.parse import parse_qsl, urljoin, urlsplit

from tests.site import Reply

CATEGORIES = ("tools", "garden", "kitchen")
TOPICS = ("returns", "shipping", "sizes", "warranty")
COLORS = ("red", "blue")
_WORDS = (
    "garden",
    "kitchen",
    "tool",
    "steel",
    "handle",
    "blade",
    "wooden",
    "sturdy",
    "light",
    "compact",
    "water",
    "season",
    "soil",
    "winter",
    "summer",
    "harvest",
    "plant",
    "seed",
    "pot",
    "spring",
    "autumn",
    "design",
    "colour",
    "cotton",
    "cup",
    "glass",
    "plate",
    "storage",
    "shelf",
    "table",
    "chair",
    "lamp",
    "bright",
    "warm",
    "cold",
    "fresh",
    "river",
    "town",
    "council",
    "report",
    "market",
    "price",
    "delivery",
    "order",
    "return",
    "parcel",
    "size",
    "fabric",
    "wash",
    "dry",
    "iron",
    "fold",
    "pocket",
    "sleeve",
    "collar",
    "button",
    "thread",
    "needle",
    "ceramic",
    "handmade",
    "glaze",
    "oven",
    "dishwasher",
    "safe",
    "gift",
    "box",
    "recipe",
    "bread",
    "butter",
    "coffee",
    "tea",
    "morning",
    "evening",
    "reader",
    "story",
    "news",
    "weather",
    "train",
    "harbour",
    "bridge",
    "road",
)


def _text(seed: str, words: int = 60) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(words)) + f" ({seed})."


def _token(text: str, size: int) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:size]


def _page(title: str, main: str, links: list[str], *, nav: bool = True) -> Reply:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    chrome = "<nav><a href='/'>home</a> | shop | news | about us | contact</nav>" if nav else ""
    body = (
        f"<!doctype html><html><head><title>{title}</title></head><body>{chrome}"
        f"<main><h1>{title}</h1><p>{main}</p></main><ul>{anchors}</ul>"
        f"<footer>{'(c) the messy company' if nav else ''}</footer></body></html>"
    )
    return Reply(body=body, headers={"Content-Type": "text/html; charset=utf-8"})


class MessySite:
    def __init__(
        self,
        products: int = 24,
        stories: int = 10,
        *,
        late_trap: bool = False,
        shop_host: str = "shop.test",
    ) -> None:
        #: The shop's host name (127.0.0.1 for a crawl in a subprocess, which
        #: cannot resolve the .test names).
        self.shop_host = shop_host
        self.products = [f"{'mug' if i % 2 == 0 else 'shirt'}-{i}" for i in range(products)]
        self.stories = stories
        self.late_trap = late_trap

    # -- which real page a URL is --

    def page_id(self, host: str, path: str, query: str) -> str | None:
        """The real page ``host``/``path``?``query`` serves (``None``: 404)."""
        params = dict(parse_qsl(query))
        parts = [p for p in path.split("/") if p]
        if host == self.shop_host:
            if not parts:
                return "shop:home"
            if parts == ["shop"] or (parts[0] == "shop" and len(parts) == 2):
                return (
                    f"shop:cat:{parts[1]}" if len(parts) == 2 and parts[1] in CATEGORIES else None
                )
            if parts[0] == "shop" and len(parts) == 3:
                slug = parts[2]
                if slug in self.products and parts[1] in self._categories(slug):
                    return self._product_id(slug, params)
                return None
            if parts[0] == "item" and len(parts) in (2, 3) and parts[1] in self.products:
                if len(parts) == 3 and parts[2] != "print":
                    return None
                return self._product_id(parts[1], params)
            if parts[0].lower() == "help":
                if len(parts) == 1:
                    return "shop:help"
                if len(parts) == 2 and parts[1].lower() in TOPICS:
                    return f"shop:help:{parts[1].lower()}"
            return None
        if host == "wiki.test":
            if not parts:
                return "wiki:home"
            if len(parts) == 2 and parts[0] == "page" and parts[1].isdigit():
                revision = params.get("v")
                if revision is None:
                    return f"wiki:page:{parts[1]}"
                if revision in self._revisions(int(parts[1])):
                    return f"wiki:page:{parts[1]}:{revision}"
            return None
        if host == "news.test":
            if not parts:
                return "news:home"
            if parts[0] == "m":
                parts = parts[1:]
            if len(parts) == 3 and parts[2] == "amp":
                parts = parts[:2]
            if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) < self.stories:
                if parts[0] == "story":
                    return f"news:story:{parts[1]}"
                if parts[0] == "blog":
                    return f"news:blog:{parts[1]}"
                if parts[0] == "docs":
                    lang = "de" if params.get("lang") == "de" else "en"
                    return f"news:docs:{parts[1]}:{lang}"
            return None
        return None

    def _revisions(self, n: int) -> list[str]:
        return [_token(f"revision {n}.{k}", 4) for k in range(3)]

    def _categories(self, slug: str) -> tuple[str, str]:
        i = self.products.index(slug)
        return CATEGORIES[i % 3], CATEGORIES[(i + 1) % 3]

    def _product_id(self, slug: str, params: dict[str, str]) -> str:
        name = f"shop:product:{slug}"
        color = params.get("color")
        if slug.startswith("shirt") and color in COLORS and self.products.index(slug) % 4 < 2:
            name += f":{color}"
        edition = params.get("edition")
        if self.late_trap and edition and self.products.index(slug) < len(self.products) // 2:
            name += f":edition-{edition}"
        return name

    def reachable(self, starts: list[str]) -> tuple[set[str], int]:
        """The real pages reachable from ``starts`` (``http://host/`` URLs), and
        how many distinct URLs lead to them (what a crawl without learned rules
        fetches, with the default URL rules)."""
        from scrapy_dedup.url import canonicalize_url

        seen: set[str] = set()
        pages: set[str] = set()
        queue = list(starts)
        while queue:
            url = queue.pop()
            key = canonicalize_url(url)
            if key in seen:
                continue
            seen.add(key)
            parts = urlsplit(url)
            host = parts.hostname or ""
            page = self.page_id(host, parts.path, parts.query)
            if page is None:
                continue
            pages.add(page)
            links = [self._link(host, parts.path, href) for href in self._links(host, page)]
            queue += [urljoin(url, link) for link in links]
        return pages, len(seen)

    # -- what it serves --

    def reply(self, host: str, path: str, query: str) -> Reply | None:
        page = self.page_id(host, path, query)
        if page is None:
            return None
        links = [self._link(host, path, href) for href in self._links(host, page)]
        return _page(page, _text(page), links, nav=not path.endswith("/print"))

    def _link(self, host: str, path: str, href: str) -> str:
        if host == "wiki.test":
            return href
        name, size = ("sid", 8) if host == self.shop_host else ("v", 4)
        sep = "&" if "?" in href else "?"
        return f"{href}{sep}{name}={_token(host + path + href, size)}"

    def _links(self, host: str, page: str) -> list[str]:
        kind, _, rest = page.partition(":")[2].partition(":")
        if host == self.shop_host:
            if kind == "home":
                return [f"/shop/{c}" for c in CATEGORIES] + ["/help"]
            if kind == "cat":
                found = [s for s in self.products if rest in self._categories(s)]
                return [f"/shop/{rest}/{s}" for s in found]
            if kind == "help":
                if not rest:
                    return [f"/help/{t}" for t in TOPICS]
                return ["/help"]
            if kind == "product":
                slug = rest.split(":")[0]
                i = self.products.index(slug)
                topic = TOPICS[i % len(TOPICS)]
                links = [f"/item/{slug}", f"/item/{slug}/print"]
                if i % 4 < 2:  # some mugs and some shirts come in colours
                    links += [f"/item/{slug}?color={c}" for c in COLORS]
                links.append(f"/Help/{topic.title()}" if i % 2 else f"/help/{topic}")
                if self.late_trap:
                    links.append(f"/item/{slug}?edition=2")
                return links
            return []
        if host == "wiki.test":
            if kind == "home":
                return [f"/page/{n}" for n in range(self.stories)]
            n = int(rest.split(":")[0])
            return [f"/page/{n}?v={r}" for r in self._revisions(n)] + ["/"]
        if kind == "home":
            links = [f"/story/{n}" for n in range(self.stories)]
            links += [f"/blog/{n}" for n in range(self.stories)]
            return links + [f"/docs/{n}" for n in range(self.stories)]
        n = int(rest.split(":")[0])
        if kind == "story":
            return [f"/story/{n}/amp", f"/m/story/{n}", f"/story/{(n + 1) % self.stories}"]
        if kind == "blog":
            return [f"/blog/{n}?lang=de", f"/blog/{(n + 1) % self.stories}"]
        if kind == "docs":
            return [f"/docs/{n}?lang=de", f"/docs/{n}"]
        return []
