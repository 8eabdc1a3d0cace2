"""A real HTTP site on 127.0.0.1 for the crawl tests.

It answers for any host name (tests reach it as ``example.test``,
``www.example.test`` and ``127.0.0.1`` through a loopback resolver) and logs
every request it serves, so tests can assert exactly what was fetched.
"""

from __future__ import annotations

import dataclasses
import gzip
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Reply:
    status: int = 200
    body: str = ""
    headers: dict[str, str | list[str]] = field(default_factory=dict)  # a list: one line each
    gzip: bool = False  # send the body gzip-compressed, as many servers do


def page(title: str, *links: str, text: str = "") -> Reply:
    anchors = "\n".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    html = (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f"<h1>{title}</h1><p>{text or title}</p><ul>{anchors}</ul></body></html>"
    )
    return Reply(body=html, headers={"Content-Type": "text/html; charset=utf-8"})


def redirect(location: str, status: int = 301) -> Reply:
    return Reply(status=status, headers={"Location": location})


Route = Callable[[str], Reply]  # called with the query string


def url_stage_routes() -> dict[str, Route]:
    """The URL-stage scenario: one real page hiding behind many URLs."""
    home = page(
        "Home",
        "/pricing?utm_source=newsletter&utm_medium=email",  # 301 -> /pricing/
        "/pricing/",
        "/pricing#faq",
        "/pricing/?ref=footer",
        "http://www.example.test:{port}/pricing",
        "https://example.test:{port}/pricing",  # never fetched: http on this port
        "/Pricing",  # path case is kept: a real, different page
        "/docs/",
        "/docs/./intro/../",
        "/docs/intro",
        "/search?q=a+b&page=2",
        "/search?page=2&q=a%20b&fbclid=XYZ",
        "/search?page=3&q=a+b",
        "/reference?id=1",
        "/reference?id=2",
        "/product?source_id=5",
        "/product?campaign_id=6",
        "/index.php?/blog/x",
        "/index.php?/blog/y",
        "/?utm_campaign=spring",
        "/#top",
        text="Welcome",
    )
    return {
        "/": lambda q: home,
        "/pricing": lambda q: redirect("/pricing/"),
        "/pricing/": lambda q: page("Pricing", "/pricing", "/", text="Plans and prices"),
        "/Pricing": lambda q: page("Old pricing", text="Legacy page, kept on purpose"),
        "/docs": lambda q: page("Docs", "/docs/intro/"),
        "/docs/": lambda q: page("Docs", "/docs/intro/"),
        "/docs/intro": lambda q: page("Intro"),
        "/search": lambda q: page(f"Search {q}"),
        "/reference": lambda q: page(f"Reference {q}"),
        "/product": lambda q: page(f"Product {q}"),
        "/index.php": lambda q: page(f"Route {q}"),
    }


class Site:
    """A threaded HTTP server with a route table and a log of what it served."""

    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        #: Answers every request when set: (Host header, path, query) -> Reply or None (404).
        self.handler: Callable[[str, str, str], Reply | None] | None = None
        self.log: list[tuple[str, str]] = []  # (Host header, path?query)
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                site._serve(self)

            do_POST = do_GET
            do_HEAD = do_GET

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Site:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/", host: str = "example.test") -> str:
        return f"http://{host}:{self.port}{path}"

    def fetched(self) -> list[str]:
        """Every path (with query) served since the last reset, in order."""
        with self._lock:
            return [path for _, path in self.log]

    def reset(self) -> None:
        with self._lock:
            self.log.clear()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            handler.rfile.read(length)
        with self._lock:
            self.log.append((handler.headers.get("Host", ""), handler.path))
        parts = urlsplit(handler.path)
        if self.handler is not None:
            host = handler.headers.get("Host", "").rpartition(":")[0]
            reply = self.handler(host, parts.path, parts.query) or Reply(404, "not found")
        else:
            route = self.routes.get(parts.path)
            reply = route(parts.query) if route else Reply(404, "not found")
        body = reply.body.replace("{port}", str(self.port)).encode("utf-8")
        if reply.gzip:
            body = gzip.compress(body)
            reply.headers = {**reply.headers, "Content-Encoding": "gzip"}
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            for line in value if isinstance(value, list) else [value]:
                handler.send_header(name, line)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)


# The content stage -----------------------------------------------------------

SOLAR = (
    "The city council approved the new solar programme on Tuesday after a long debate about "
    "costs, maintenance and the share of roofs that can carry panels. Under the plan, every "
    "public school and library will receive rooftop panels over the next three years, and "
    "households on low incomes can apply for a grant that covers most of the installation. "
    "Engineers from the utility told the council that the panels would supply about a fifth "
    "of the electricity used by public buildings, and that the savings would repay the "
    "investment within nine years. Several members asked how the panels would be recycled "
    "at the end of their life, and the council added a clause that requires suppliers to "
    "take back old modules. Residents who spoke at the meeting mostly welcomed the plan, "
    "although a group of shop owners worried about the noise and traffic of construction "
    "in the old town during the summer season. The mayor promised that work in the centre "
    "would be scheduled for the quieter months, and that a public map would show which "
    "buildings are next. A first progress report is due in the spring, when the council "
    "will also decide whether to extend the grants to small businesses and sports clubs."
)
WIND = (
    "A small harbour town has spent the past decade turning its fishing piers into a base "
    "for servicing offshore wind farms. Crews now leave at dawn in fast catamarans, carrying "
    "technicians who climb the towers to inspect blades, replace bearings and download data "
    "from the turbines. The work pays better than fishing ever did, older residents say, but "
    "it has also changed the rhythm of the place: the cafes open earlier, the boatyard builds "
    "aluminium hulls instead of wooden trawlers, and the school runs an evening course in "
    "marine electrics. Not everyone is pleased. Some families who fished for generations feel "
    "that their quotas were sold too cheaply, and the harbour master complains that the new "
    "vessels crowd the slipway at the worst hours. Still, the town council reports that the "
    "population has grown for the first time since the nineteen seventies, and the railway "
    "company has restored a morning train that had been cancelled for years."
)
BLOG = (
    "We moved our build system to a new set of machines last month, and this post explains "
    "what broke and what we learned. The old servers were six years old and ran every job "
    "in one queue, so a slow integration test could block a small documentation change for "
    "an hour. The new setup splits jobs by size, caches dependencies between runs, and keeps "
    "the logs for thirty days instead of seven. The first week was rough: two teams found "
    "that their tests depended on the timezone of the old machines, and a release script "
    "assumed a path that no longer existed. We fixed both, added a check that fails loudly "
    "when a job reads the clock without setting a timezone, and wrote down the paths that "
    "scripts may rely on. Build times dropped by a third on average, and the longest jobs "
    "now finish before lunch instead of after it. Next we want to run the slowest suites "
    "nightly and give every pull request a quick smoke test within five minutes."
)
PRESS = (
    "Acme Widgets today announced the opening of its new engineering office in {city}. The "
    "office will host forty engineers working on sensors for agriculture and water "
    'management, and the company plans to double that number within two years. "We chose '
    "{city} because of its universities, its airport and a community of hardware start-ups "
    'that keeps growing," said the chief executive, adding that the team will work closely '
    "with local farms to test new soil moisture probes in real fields. The office occupies "
    "two floors of a former textile mill near the river, renovated with timber frames, a "
    "workshop for prototypes and a small laboratory for testing electronics in heat and "
    "humidity. Acme Widgets was founded eleven years ago and sells its devices in more than "
    "thirty countries. The company said it would offer paid internships to students from "
    "local colleges every summer, and that the workshop will open to school groups once a "
    "month. Applications for the first positions are open now on the company website."
)
PRODUCT = (
    "Garden hose, 25 metres, reinforced. SKU {sku}. A flexible hose with three layers and a "
    "knitted core that resists kinks and bursts, for daily watering of lawns, beds and "
    "vegetable patches. The outer layer is protected against sunlight and frost, so the hose "
    "can stay outside all year. Brass fittings at both ends screw onto standard taps and "
    "spray guns without tools. Weight 3.2 kilograms; working pressure up to 20 bar. Delivered "
    "rolled and tied, with a wall bracket and a spare washer. Two year guarantee. Customers "
    "who bought this hose also looked at our spray guns, hose reels and drip irrigation kits."
)


def article(title: str, body: str, *links: str, extra_head: str = "", token: str = "") -> Reply:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    html = (
        f"<!doctype html><html><head><title>{title}</title>{extra_head}</head><body>"
        f"<nav>{anchors}</nav><main><h1>{title}</h1><p>{body}</p></main>"
        f'<footer><form><input type="hidden" name="csrf" value="{token}"></form></footer>'
        "</body></html>"
    )
    return Reply(body=html, headers={"Content-Type": "text/html; charset=utf-8"})


def content_stage_routes() -> dict[str, Route]:
    """Real pages whose text repeats under other URLs."""
    nav = (
        "/articles/solar",
        "/articles/solar/print",
        "/articles/wind",
        "/shop/garden/hose-25",
        "/shop/sale/hose-25",
        "/shop/hose-25-blue",
        "/news/office-boston",
        "/news/office-denver",
        "/blog/post",
        "/archive/2024/post",
    )
    counter = iter(range(10**6))  # a fresh timestamp and CSRF token on every response

    def stamped(q: str) -> Reply:
        n = next(counter)
        return article(
            "Build notes",
            BLOG,
            *nav,
            extra_head=f'<meta name="generated" content="2026-12-02T10:{n:02d}:00">',
            token=f"tok{n}x{n * 7919}",
        )

    return {
        "/": lambda q: article("Home", "Welcome to the example news site.", *nav),
        "/articles/solar": lambda q: article("Solar plan", SOLAR, *nav),
        "/articles/solar/print": lambda q: article("Solar plan", SOLAR.upper()),  # print view
        "/articles/wind": lambda q: article("Wind town", WIND, *nav),
        "/shop/garden/hose-25": lambda q: article("Hose", PRODUCT.format(sku="GH-2500"), *nav),
        "/shop/sale/hose-25": lambda q: article("Hose", PRODUCT.format(sku="GH-2500"), *nav),
        "/shop/hose-25-blue": lambda q: article("Hose", PRODUCT.format(sku="GH-2517"), *nav),
        "/news/office-boston": lambda q: article("Office", PRESS.format(city="Boston"), *nav),
        "/news/office-denver": lambda q: article("Office", PRESS.format(city="Denver"), *nav),
        "/blog/post": stamped,
        "/archive/2024/post": stamped,
    }


# rel=canonical -----------------------------------------------------------------


def declaring(
    title: str,
    text: str,
    *links: str,
    head: str = "",
    status: int = 200,
    headers: dict[str, str] | None = None,
    tail: str = "",
) -> Reply:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    html = (
        f"<!doctype html><html><head><title>{title}</title>{head}</head><body>"
        f"<nav>{anchors}</nav><main><h1>{title}</h1><p>{text}</p>{tail}</main></body></html>"
    )
    return Reply(
        status=status,
        body=html,
        headers={"Content-Type": "text/html; charset=utf-8", **(headers or {})},
    )


def canonical_routes() -> dict[str, Route]:
    """Pages declaring rel=canonical, sensibly and absurdly."""
    home = (
        "/shop/garden/hose",
        "/shop/sale/hose",
        "/rel/page",
        "/files/report",
        "/missing-thing",
        "/spam",
        "/js",
        "/huge",
        "/broken",
        "/self",
        "/gone",
        "/zipped",
        "/list?page=2",
        "/list?page=3",
        "/products/lamp",
    )
    hose = PRODUCT.format(sku="GH-2500")
    canonical = '<link rel="canonical" href="{}">'.format
    filler = "<p>" + ("All the words of a very long page. " * 300_000) + "</p>"  # ~10 MB
    return {
        "/": lambda q: declaring("Home", "Welcome to the shop.", *home),
        # one product under two categories, both declaring the product's own URL
        "/shop/garden/hose": lambda q: declaring(
            "Hose",
            "Category: Garden. " + hose,
            "/products/hose",
            head=canonical("/products/hose"),
        ),
        "/shop/sale/hose": lambda q: declaring(
            "Hose",
            "Category: Sale. " + hose,
            "/products/hose",
            head='<LINK href="http://example.test:{port}/products/hose" REL="Canonical">',
        ),
        "/products/hose": lambda q: declaring("Hose", hose),
        # relative canonical, resolved against <base href>
        "/rel/page": lambda q: declaring(
            "Widget",
            "A widget page reached through a tracking path.",
            head='<base href="/catalog/"><link rel="canonical" href="widget">',
        ),
        # a Link header, as PDFs and other non-HTML documents declare it
        "/files/report": lambda q: declaring(
            "Report",
            "The annual report, served from a file store.",
            headers={"Link": '</docs/report>; rel="canonical", </x.css>; rel="stylesheet"'},
        ),
        # a soft 404 that declares the homepage
        "/missing-thing": lambda q: declaring(
            "Not found", "Sorry, this page does not exist.", head=canonical("/")
        ),
        # hijacking: a canonical on someone else's site
        "/spam": lambda q: declaring(
            "Cheap",
            "Copied text pretending to live elsewhere.",
            head=canonical("https://other-site.example/original"),
        ),
        "/js": lambda q: declaring(
            "Script", "A page with a scripted canonical.", head=canonical("javascript:void(0)")
        ),
        "/huge": lambda q: declaring(
            "Huge", "A very long page.", head=canonical("/products/huge"), tail=filler
        ),
        "/broken": lambda q: Reply(
            body='<html><head><title>Broken</title><link rel="canonical" href="/products/bro'
            "<meta charset=\x00\x01><body><main><h1>Broken</h1><p>Half a page of broken "
            "markup, still a page.</p><div><span></main>",
            headers={"Content-Type": "text/html"},
        ),
        "/self": lambda q: declaring(
            "Self", "A page that names itself.", head=canonical("/self?utm_source=x")
        ),
        "/zipped": lambda q: dataclasses.replace(
            declaring("Zipped", "Served gzip-compressed.", head=canonical("/products/zipped")),
            gzip=True,
        ),
        # the canonical page fetched first, then a variant (another breadcrumb) declaring it
        "/products/lamp": lambda q: declaring(
            "Lamp", PRESS.format(city="Oslo"), "/shop/lamps/desk-lamp"
        ),
        "/shop/lamps/desk-lamp": lambda q: declaring(
            "Lamp",
            "Category: Lamps. " + PRESS.format(city="Oslo"),
            head=canonical("/products/lamp"),
        ),
        # the SEO mistake: later pages of a list declaring page 1 as canonical
        "/list": lambda q: declaring(
            f"List {q}",
            {"page=2": WIND, "page=3": BLOG}.get(q, SOLAR),
            head=canonical("/list"),
        ),
        "/gone": lambda q: declaring(
            "Gone", "Deleted.", head=canonical("/products/gone"), status=404
        ),
    }


def store_stage_texts() -> list[tuple[str, str, str]]:
    """The articles of :func:`store_stage_routes`: ``(path, body, name)``, the
    name of its real content ("doc<i>"), in site order. The first article of
    each list from the 2nd on repeats list 1's first word for word; the 7th
    repeats list 1's second with one word changed (the same change each time).
    """
    from tests.text.neardup_corpus import documents

    texts = documents(min_words=120, max_words=300, seed=7)
    articles: list[tuple[str, str, str]] = []
    doc = 0
    for n in range(1, 6):
        for m in range(1, 9):
            if m == 8 and n > 1:  # the same text as the first article of the previous list
                body, name = texts[0], "doc0"
            elif m == 7 and n > 1:  # one word changed from list 1's second article
                body, name = texts[1].replace(" the ", " a ", 1), "doc1"
            else:
                body, name = texts[doc], f"doc{doc}"
                doc += 1
            articles.append((f"/article/{n}-{m}", body, name))
    # A chain of stories, each reachable only from the one before: after a
    # crash, the links of pages already recorded must not be lost.
    for n in range(1, 13):
        articles.append((f"/article/chain-{n}", texts[doc], f"doc{doc}"))
        doc += 1
    return articles


def store_stage_routes(delay: float = 0.0) -> tuple[dict[str, Route], dict[str, str]]:
    """A news site of hub pages and articles for the store tests: 5 list pages,
    each linking (with tracking parameters, the next list page) to 8 articles
    (:func:`store_stage_texts`), and a chain of 12 stories from the home page.

    Returns the routes and, for every article path, the name of its real
    content ("doc<i>"): one item per name is what a correct crawl keeps.
    """
    import time

    routes: dict[str, Route] = {}
    content: dict[str, str] = {}
    lists: dict[int, list[str]] = {n: [] for n in range(1, 6)}
    for path, body, name in store_stage_texts():
        content[path] = name
        if path.startswith("/article/chain-"):
            n = int(path.rsplit("-", 1)[1])
            links: tuple[str, ...] = (f"/article/chain-{n + 1}",) if n < 12 else ()
            routes[path] = lambda q, body=body, name=name, links=links: (
                time.sleep(delay),
                article(f"Story {name}", body, "/", *links),
            )[1]
            continue
        n, m = map(int, path.rsplit("/", 1)[1].split("-"))
        lists[n].append(f"{path}?utm_source=list{n}" if m % 3 == 0 else path)
        routes[path] = lambda q, body=body, name=name: (
            time.sleep(delay),
            article(f"Story {name}", body, "/", "/list/1"),
        )[1]
    for n, links_of in lists.items():
        if n < 5:
            links_of.append(f"/list/{n + 1}?ref=next")
        routes[f"/list/{n}"] = lambda q, n=n, links=tuple(links_of): (
            time.sleep(delay),
            page(f"List {n}", *links),
        )[1]
    routes["/"] = lambda q: page("News", "/list/1", "/list/1?utm_medium=home", "/article/chain-1")
    return routes, content


def print_view_routes(
    pages: int = 120, print_of: int | Iterable[int] = 79, ahead: int = 0
) -> dict[str, Route]:
    """A chain of pages ``/p/0`` -> ``/p/1`` -> ... (each reachable only from
    the one before) and, linked from the home page, the print view of
    ``/p/<print_of>`` (of each page in ``print_of``): the same article without
    navigation, declaring the page as its canonical (a correct declaration).
    Whatever follows ``/p/<print_of>`` is reached only by fetching it. With
    ``ahead``, page ``n`` links the print view of page ``n + ahead`` instead
    ("coming next, to print"), so some declared pages are fetched, and their
    declarations checked, before the print views of the later ones come."""
    from tests.text.neardup_corpus import documents

    prints = [print_of] if isinstance(print_of, int) else list(print_of)
    texts = documents(min_words=60, max_words=120, seed=23)[:pages]
    canonical = '<link rel="canonical" href="/p/{}">'.format
    home = ("/p/0",) if ahead else ("/p/0", *(f"/p/{n}/print" for n in prints))
    routes: dict[str, Route] = {"/": lambda q: article("Home", "the home page", *home)}
    for n in range(pages):
        links: tuple[str, ...] = (f"/p/{n + 1}",) if n + 1 < pages else ()
        if ahead and n + ahead in prints:
            links += (f"/p/{n + ahead}/print",)
        routes[f"/p/{n}"] = lambda q, n=n, links=links: article(f"Page {n}", texts[n], *links)
    for n in prints:
        routes[f"/p/{n}/print"] = lambda q, n=n: article(
            f"Page {n}", texts[n], extra_head=canonical(n)
        )
    return routes


def view_routes(articles: int = 40, first: int = 0) -> dict[str, Route]:
    """Articles ``/a/<n>`` that are reached through their views: each AMP view
    ``/a/<n>/amp`` links its print view, a tracking landing page
    ``/a/<n>?from=amp``, the clean page and the next article's AMP view; every
    view declares the clean page (always rightly: the same article). The clean
    page links nothing the views do not. ``first``: the first text of the
    corpus used (sites of their own texts)."""
    from tests.text.neardup_corpus import documents

    texts = documents(min_words=60, max_words=120, seed=29)[first : first + articles]
    canonical = '<link rel="canonical" href="/a/{}">'.format

    if len(texts) < articles:
        raise ValueError(f"the corpus has fewer than {first + articles} texts")

    def clean(n: int, q: str) -> Reply:
        if q:  # the tracking landing page: the article, declaring its clean URL
            return article(f"Article {n}", texts[n], f"/a/{n}/amp", extra_head=canonical(n))
        return article(f"Article {n}", texts[n], f"/a/{n}/amp")

    def amp(n: int) -> Reply:
        links = [f"/a/{n}/print", f"/a/{n}?from=amp", f"/a/{n}"]
        if n + 1 < articles:
            links.append(f"/a/{n + 1}/amp")
        return article(f"Article {n}", texts[n], *links, extra_head=canonical(n))

    routes: dict[str, Route] = {"/": lambda q: article("Home", "the home page", "/a/0/amp")}
    for n in range(articles):
        routes[f"/a/{n}"] = lambda q, n=n: clean(n, q)
        routes[f"/a/{n}/amp"] = lambda q, n=n: amp(n)
        routes[f"/a/{n}/print"] = lambda q, n=n: article(
            f"Article {n}", texts[n], extra_head=canonical(n)
        )
    return routes
