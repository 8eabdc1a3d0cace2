"""Where dedup state lives: memory, an SQLite file, Redis, or a store of your
own. No Scrapy import.

:func:`open_store` builds a store from a ``DEDUP_STORE`` URI: its scheme names
the class (:data:`STORE_CLASSES`, extended by ``DEDUP_STORE_CLASSES``), whose
``from_uri`` reads the rest, as Scrapy picks a cache storage from
``HTTPCACHE_STORAGE``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from importlib import import_module
from typing import Any
from urllib.parse import urlsplit

from scrapy_dedup.stores.base import FILED_LIMIT, Adoption, DedupStore, StoreError, redact
from scrapy_dedup.stores.compact import CompactMap
from scrapy_dedup.stores.guarded import GuardedStore
from scrapy_dedup.stores.memory import MemoryStore
from scrapy_dedup.stores.sqlite import SqliteStore

__all__ = [
    "FILED_LIMIT",
    "STORE_CLASSES",
    "Adoption",
    "CompactMap",
    "DedupStore",
    "GuardedStore",
    "MemoryStore",
    "SqliteStore",
    "StoreError",
    "open_store",
    "redact",
    "store_class",
    "uri_scheme",
]

_REDIS = "scrapy_dedup.stores.redis.RedisStore"
#: The built-in stores by URI scheme (class paths, imported on use).
STORE_CLASSES: dict[str, str] = {
    "memory": "scrapy_dedup.stores.memory.MemoryStore",
    "sqlite": "scrapy_dedup.stores.sqlite.SqliteStore",
    "redis": _REDIS,
    "rediss": _REDIS,
    "unix": _REDIS,
    "redis+cluster": _REDIS,
    "rediss+cluster": _REDIS,
}


def uri_scheme(uri: str) -> str:
    """The scheme of a store URI, lowercased (``memory`` has no colon).

    >>> uri_scheme("SQLite:///a.db"), uri_scheme("memory")
    ('sqlite', 'memory')
    """
    uri = uri.strip()
    return (uri.split(":", 1)[0] if ":" in uri else uri).lower()


def store_class(uri: str, classes: Mapping[str, Any] | None = None) -> type[DedupStore]:
    """The store class for ``uri``'s scheme: from ``classes`` (a class or a
    class path by scheme), else from :data:`STORE_CLASSES`.

    Raises ``ValueError`` for an unknown scheme and :class:`StoreError` when
    the class cannot be imported (redis-py not installed)."""
    scheme = uri_scheme(uri)
    known = {**STORE_CLASSES, **(classes or {})}
    target = known.get(scheme)
    if target is None:
        raise ValueError(
            f"DEDUP_STORE={redact(uri)!r} is not a store URI: use 'memory', "
            "'sqlite:///path.db', 'redis://host:port/db' or 'redis+cluster://host:port' "
            f"(or add a class for {scheme!r} to DEDUP_STORE_CLASSES)"
        )
    if isinstance(target, str):
        module, _, name = target.rpartition(".")
        try:
            target = getattr(import_module(module), name)
        except ImportError as exc:
            hint = " pip install 'scrapy-dedup[redis]'" if target == _REDIS else ""
            raise StoreError(f"DEDUP_STORE={redact(uri)!r} needs {exc.name}:{hint}") from exc
    if not (isinstance(target, type) and issubclass(target, DedupStore)):
        raise ValueError(f"DEDUP_STORE_CLASSES[{scheme!r}] is not a DedupStore class: {target!r}")
    return target


def open_store(
    uri: str,
    namespace: str,
    *,
    jobdir: str | None = None,
    prefix: str = "dedup",
    classes: Mapping[str, Any] | None = None,
    **options: Any,
) -> DedupStore:
    """The store a ``DEDUP_STORE`` URI names, for ``namespace``.

    - ``memory``: in this process; with ``jobdir`` (Scrapy's ``JOBDIR``) kept
      in ``<jobdir>/dedup.sqlite3`` for pause and resume: every key seen, as
      Scrapy's ``requests.seen``, and a frontier fed to the next run only
      after a crash (after a pause, Scrapy's own queue holds those requests);
    - ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``: the
      pages whose items were kept, for incremental recrawls;
    - ``redis://host:port/db`` (also ``rediss://``, ``unix://``), or
      ``redis+cluster://host:port`` for a Redis Cluster (any node).

    ``options`` (``recrawl_after``, ``timeout``...) go to the class's
    ``from_uri`` where it takes them, so a store of your own written for an
    older version keeps working.

    Raises :class:`StoreError` when the store cannot be used, ``ValueError``
    for a URI it cannot read.
    """
    cls = store_class(uri, classes)
    if cls is MemoryStore and jobdir:
        MemoryStore.from_uri(uri, namespace)  # validates the URI
        cls = SqliteStore
        path = os.path.join(jobdir, "dedup.sqlite3")
        return SqliteStore(
            path, namespace, persist="seen", resume="after_crash", **_taken(cls, options)
        )
    if f"{cls.__module__}.{cls.__qualname__}" == _REDIS:
        _check_redis_uri(uri.strip())
    try:
        return cls.from_uri(
            uri.strip(), namespace, jobdir=jobdir, prefix=prefix, **_taken(cls.from_uri, options)
        )
    except StoreError as exc:
        if "DB index is out of range" not in str(exc):
            raise
        db = urlsplit(uri.strip()).path.strip("/")
        raise StoreError(
            f"DEDUP_STORE={redact(uri)!r}: database {db} does not exist on this server "
            "(Redis has databases 0 to 15 unless its 'databases' setting says otherwise)"
        ) from None


def _check_redis_uri(uri: str) -> None:
    """Refuse what redis-py would misread: a password with an ``@``, ``/``,
    ``?`` or ``#`` not percent-encoded (the host would be read from inside
    it), and a database that is not a number (redis-py uses 0)."""
    parts = urlsplit(uri)
    if "@" in parts.path + parts.query + parts.fragment:
        raise ValueError(
            f"DEDUP_STORE={redact(uri)!r}: its user name or password holds a character "
            "a URI must percent-encode ('@', '/', '?', '#'): write it encoded, e.g. with "
            "urllib.parse.quote(password, safe='')"
        )
    db = parts.path.strip("/")
    if parts.scheme != "unix" and db and not db.isdigit():
        raise ValueError(
            f"DEDUP_STORE={redact(uri)!r}: the database must be a number, as in "
            f"redis://localhost:6379/0, got {db!r}"
        )


def _taken(function: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The ``options`` that ``function`` accepts (all, if it takes ``**kwargs``)."""
    parameters = inspect.signature(function).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return options
    return {name: value for name, value in options.items() if name in parameters}
