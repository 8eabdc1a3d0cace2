"""Acme Widgets: the small website the demo crawl runs against.

A stdlib HTTP server, so the demo works on a machine without internet. Like
most real sites it reaches its 15 pages under many more URLs: tracking
parameters (``?utm_source=``, ``?ref=``, ``?gclid=``), ``#fragments``,
trailing-slash variants, reordered query parameters, an absolute link to
itself, and ``/pricing`` answering 301 to ``/pricing/``.

Serve it alone with ``python -m demo.demo_site`` (from ``example_project/``).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

__all__ = ["PAGES", "DemoSite"]

NAV = (
    '<a href="/">Acme Widgets</a> <a href="/pricing">Pricing</a> <a href="/docs/">Docs</a> '
    '<a href="/blog/">Blog</a> <a href="/about">About</a> <a href="/contact">Contact</a>'
)
FOOTER = (
    '<a href="{origin}/">Home</a> <a href="/pricing/?ref=footer">Plans</a> '
    '<a href="/docs/?ref=footer">Documentation</a> <a href="/blog/?ref=footer">Blog</a> '
    '<a href="/about/">Company</a> <a href="/contact#form">Get in touch</a> '
    "<p>&copy; 2025 Acme Widgets, Inc. Made with care in Portland, Oregon.</p>"
)

POSTS = {  # newest first, two per page of the blog index
    "/blog/launching-acme-widgets-2": "Launching Acme Widgets 2.0",
    "/blog/how-we-cut-build-times": "How we cut our build times in half",
    "/blog/hello-world": "Hello, world: why we started Acme Widgets",
}

#: Every real page: path -> (title, main content). The blog index is built
#: per page of results in :func:`blog_index`.
PAGES: dict[str, tuple[str, str]] = {
    "/": (
        "Widgets for teams that ship",
        """<p>Acme Widgets gives product teams drop-in dashboards, forms and charts that
        look right on day one. Connect your data, pick a widget and embed it anywhere with
        a single line of HTML. No design sprint required.</p>
        <p>More than 4,000 teams use Acme Widgets to show customers what matters, from
        two-person startups to hospitals and city governments.</p>
        <h2>Latest from the blog</h2>
        <ul><li><a href="/blog/launching-acme-widgets-2">Launching Acme Widgets 2.0</a></li>
        <li><a href="/blog/how-we-cut-build-times">How we cut our build times in half</a></li></ul>
        <h2>Get started</h2>
        <p>Read the <a href="/docs/getting-started">five-minute guide</a>, see
        <a href="/changelog">what changed recently</a>, or
        <a href="/pricing/?utm_source=homepage&amp;utm_medium=hero">start a free trial</a>.
        </p>""",
    ),
    "/pricing/": (
        "Pricing",
        """<p>Every plan includes unlimited viewers, SSL everywhere and our 99.9% uptime
        commitment. Pay monthly or save two months by paying yearly.</p>
        <h2 id="plans">Plans</h2>
        <ul><li>Starter: $0 a month for up to three widgets and one editor.</li>
        <li>Team: $49 a month for unlimited widgets, ten editors and custom themes.</li>
        <li id="enterprise">Enterprise: single sign-on, audit logs and a named support
        engineer. <a href="/contact#sales">Talk to sales</a>.</li></ul>
        <h2 id="faq">Questions</h2>
        <p>Can I change plans later? Yes, at any time; we prorate the difference. More
        answers in the <a href="/docs/faq">FAQ</a>.</p>""",
    ),
    "/about": (
        "About us",
        """<p>Acme Widgets started in 2019 when three engineers got tired of rebuilding
        the same admin dashboard at every job. Today we are a team of 32 spread across
        nine time zones, with a small office in Portland.</p>
        <p id="team">We are profitable, independent and in no hurry to be acquired. Read
        <a href="/blog/hello-world">the story of our first year</a> or
        <a href="/contact?utm_source=about&amp;utm_medium=cta">say hello</a>.</p>""",
    ),
    "/contact": (
        "Contact",
        """<p id="sales">Sales: tell us about your team and we will get back to you within
        one business day.</p>
        <p id="support">Support: customers on any plan can write to
        <a href="mailto:help@acme-widgets.example">help@acme-widgets.example</a>. Most
        questions are already answered in the <a href="/docs/faq">FAQ</a>.</p>
        <form id="form" method="post" action="/contact"><input name="email"></form>""",
    ),
    "/changelog": (
        "Changelog",
        """<p>Version 2.0.3 fixes chart legends overlapping on narrow screens and makes
        CSV exports respect the time zone of the viewer.</p>
        <p>Version 2.0 brought the new widget editor; read
        <a href="/blog/launching-acme-widgets-2?utm_source=changelog">the announcement</a>
        and the <a href="/docs/api#v2">API changes</a>.</p>""",
    ),
    "/blog/launching-acme-widgets-2": (
        "Launching Acme Widgets 2.0",
        """<p>Today we are releasing Acme Widgets 2.0, the biggest update since launch.
        The new editor lets you arrange widgets on a grid, preview them on phones and
        publish changes without touching your site's code.</p>
        <p>Existing customers get 2.0 automatically. If you read about it in our
        newsletter, the <a href="/pricing?utm_source=newsletter&amp;utm_medium=email">new
        Team plan</a> is live too, and the
        <a href="/docs/getting-started/#install">getting started guide</a> is updated. We
        also wrote up how we made the builds faster:
        <a href="/blog/how-we-cut-build-times?utm_source=twitter&amp;utm_medium=social">read
        it here</a>.</p>
        <p><a href="/blog/launching-acme-widgets-2/print">Print this post</a>. Press:
        <a href="/press/berlin">Berlin</a>, <a href="/press/lisbon">Lisbon</a>.</p>""",
    ),
    "/blog/how-we-cut-build-times": (
        "How we cut our build times in half",
        """<p>Our continuous integration pipeline had crept up to 22 minutes. By caching
        dependencies per lockfile, splitting the test suite across four runners and
        dropping a screenshot step nobody looked at, we brought it down to nine.</p>
        <p>Faster builds meant smaller pull requests and fewer late-night deploys. If you
        arrived from our ad, <a href="/pricing/?gclid=Cj0KCQiA4L67BhDUARIsADWrl7H">the Team
        plan</a> includes the same CI integration.</p>""",
    ),
    "/blog/hello-world": (
        "Hello, world: why we started Acme Widgets",
        """<p>Every company we worked at had the same internal tool: a dashboard of charts
        and forms held together with copy-pasted code. We decided to build it once,
        properly, and let everyone else skip that work.</p>
        <p>This blog will cover what we learn along the way: engineering, pricing and
        running a small company. Meet <a href="/about#team">the team</a>.</p>""",
    ),
    "/docs/": (
        "Documentation",
        """<p>Everything you need to embed widgets in your product, from a first chart to
        the full REST API.</p>
        <ul><li><a href="/docs/getting-started">Getting started</a></li>
        <li><a href="/docs/installation">Installation</a></li>
        <li><a href="/docs/api">API reference</a></li>
        <li><a href="/docs/faq">Frequently asked questions</a></li></ul>""",
    ),
    "/docs/getting-started": (
        "Getting started",
        """<p>Create a free account, choose a widget from the gallery and connect a data
        source: a CSV upload, a Google Sheet or a Postgres database.</p>
        <p id="install">Then paste the embed snippet into your page. The
        <a href="/docs/installation">installation guide</a> covers frameworks such as
        React and Django, and the <a href="/docs/api#authentication">API reference</a>
        explains how to create widgets from code.</p>""",
    ),
    "/docs/installation": (
        "Installation",
        """<p id="requirements">The embed script works in every browser released in the
        last three years and weighs 18 kB compressed. Server-side packages need Node 18 or
        Python 3.10 and later.</p>
        <p>Back to <a href="/docs/getting-started/">getting started</a>, or on to
        <a href="/docs/api#rate-limits">rate limits</a> and the <a href="/docs/faq">FAQ</a>.
        </p>""",
    ),
    "/docs/api": (
        "API reference",
        """<p id="authentication">Authenticate with a bearer token from your account
        settings. Tokens can be scoped to one workspace and revoked at any time.</p>
        <p id="rate-limits">Each token may make 600 requests a minute; responses carry the
        remaining quota in a header. See <a href="/docs/installation#requirements">the
        requirements</a>, the <a href="/docs/faq#errors">error codes</a> and
        <a href="/docs/getting-started?ref=api-docs">the quick start</a>.</p>""",
    ),
    "/docs/faq": (
        "Frequently asked questions",
        """<p>Do widgets slow down my site? No: they load after your page and cache data at
        the edge. Can I remove the Acme logo? Yes, on the <a href="/pricing/#plans">Team
        plan</a> and above.</p>
        <p id="errors">Seeing error 429? You hit a rate limit; see the
        <a href="/docs/api">API reference</a> or <a href="/contact#support">contact
        support</a>.</p>""",
    ),
}


def blog_index(page: int) -> tuple[str, str]:
    """The blog index, two posts a page; linked as ``?page=2&sort=new`` and
    ``?sort=new&page=2`` like a real site whose templates disagree."""
    posts = list(POSTS.items())[(page - 1) * 2 : page * 2]
    items = "".join(f'<li><a href="{path}">{title}</a></li>' for path, title in posts)
    newer = '<a href="/blog/">Newer posts</a>' if page > 1 else ""
    older = '<a href="/blog/?page=2&amp;sort=new">Older posts</a>' if page < 2 else ""
    return (
        "Blog" if page == 1 else f"Blog, page {page}",
        f"""<p>Product news, engineering notes and the occasional opinion from the team
        behind Acme Widgets.</p><ul>{items}</ul><p>{newer} {older}</p>
        <p>Pages: <a href="/blog/">1</a> <a href="/blog/?sort=new&amp;page=2">2</a></p>""",
    )


PRESS_RELEASE = """<p>Acme Widgets opens a support and engineering office in {city}</p>
<p>Acme Widgets, the company behind the embeddable widget editor used by thousands of small
businesses, today announced a new office in {city}. The team will support customers in their
own time zone, run workshops for agencies and build the integrations that European customers
ask for most: payment providers, booking systems and accessible forms. The office opens with
twelve people and plans to grow to thirty within two years, hiring engineers, designers and
support specialists. Customers can book a free onboarding session with the new team from next
month, and partners are invited to an open day with talks, demos and coffee on the first
Friday of every quarter. Acme Widgets 2.0, released this spring, introduced a grid editor,
phone previews and publishing without code changes; the company says the new office will
focus on the next release, with offline editing and shared component libraries.</p>"""
# The content stage has something to find: a print view repeats a post word for word
# (an exact duplicate) and one press release runs under two cities (a near duplicate).
# The print view also declares the post as its rel=canonical.
PAGES["/blog/launching-acme-widgets-2/print"] = PAGES["/blog/launching-acme-widgets-2"]
CANONICAL = {"/blog/launching-acme-widgets-2/print": "/blog/launching-acme-widgets-2"}
PAGES["/press/berlin"] = ("Press release", PRESS_RELEASE.format(city="Berlin"))
PAGES["/press/lisbon"] = ("Press release", PRESS_RELEASE.format(city="Lisbon"))


def render(path: str, query: str, origin: str) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) for a GET of ``path?query``. Unknown query
    parameters are ignored, as most sites do."""
    if path == "/robots.txt":
        return 200, {"Content-Type": "text/plain"}, "User-agent: *\nDisallow:\n"
    if path in ("/pricing", "/docs", "/blog"):  # directories answer 301 to their slash
        return 301, {"Location": path + "/" + (f"?{query}" if query else "")}, ""
    params = dict(parse_qsl(query))
    if path == "/blog/" and params.get("page", "1") in ("1", "2"):
        title, main = blog_index(int(params.get("page", "1")))
    else:
        page = PAGES.get(path) or PAGES.get(path.rstrip("/"))  # "/about/" is "/about"
        if page is None:
            return 404, {"Content-Type": "text/plain"}, "Not found\n"
        title, main = page
    canonical = CANONICAL.get(path)
    head = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    html = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} | Acme Widgets</title>{head}</head>
<body><header><nav>{NAV}</nav></header>
<main><h1>{title}</h1>{main}</main>
<footer>{FOOTER.format(origin=origin)}</footer></body></html>
"""
    return 200, {"Content-Type": "text/html; charset=utf-8"}, html


class DemoSite:
    """The demo site served by a background thread on 127.0.0.1.

    Links stay on the host the page was requested as, whatever the Host header.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                origin = "http://" + (self.headers.get("Host") or site.netloc)
                status, headers, text = render(parts.path, parts.query, origin)
                body = text.encode("utf-8")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, format: str, *args: object) -> None:
                pass  # Scrapy logs the crawl; keep the server quiet

        self.host = host
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def netloc(self) -> str:
        return f"{self.host}:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.netloc}/"

    def start(self) -> DemoSite:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    site = DemoSite(port=8000)
    print(f"Acme Widgets demo site on {site.url} (Ctrl+C to stop)")
    try:
        site.server.serve_forever()
    except KeyboardInterrupt:
        site.server.server_close()
