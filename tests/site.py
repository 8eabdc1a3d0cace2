"""A real HTTP site on 127.0.0.1 for the crawl tests.

It answers for any host name (tests reach it as ``example.test``,
``www.example.test`` and ``127.0.0.1`` through a loopback resolver) and logs
every request it serves, so tests can assert exactly what was fetched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Reply:
    status: int = 200
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)


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
        route = self.routes.get(parts.path)
        reply = route(parts.query) if route else Reply(404, "not found")
        body = reply.body.replace("{port}", str(self.port)).encode("utf-8")
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)
