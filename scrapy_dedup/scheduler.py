"""DedupScheduler: Scrapy's scheduler, telling the dupefilter of the requests
it never asks about (``dont_filter``) as it enqueues them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.core.scheduler import Scheduler
from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from scrapy import Request

__all__ = ["DedupScheduler", "tells_unfiltered"]


class DedupScheduler(Scheduler):
    """Scrapy's default scheduler, which also hands each ``dont_filter``
    request to the dupefilter's ``record_unfiltered`` (when it has one) before
    enqueueing it, so that a later link to a start URL or a retried page is
    not fetched again.

    Without it :class:`~scrapy_dedup.CanonicalDupeFilter` learns of those
    requests from the ``request_scheduled`` signal, which Scrapy sends for
    every request: a receiver there costs about 3 µs a request for the few
    that are ``dont_filter``. :class:`~scrapy_dedup.DedupAddon` sets
    ``SCHEDULER`` to this class when the project uses Scrapy's own; other
    schedulers (scrapy-redis's) are left alone and the signal is used.
    A request dropped by a ``request_scheduled`` receiver (``IgnoreRequest``)
    never reaches the scheduler, and is not recorded: a later link to it is
    fetched.
    """

    def __init__(self, dupefilter: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(dupefilter, *args, **kwargs)
        self._record_unfiltered = getattr(dupefilter, "record_unfiltered", None)

    def enqueue_request(self, request: Request) -> bool:
        if request.dont_filter and self._record_unfiltered is not None:
            self._record_unfiltered(request)
        return super().enqueue_request(request)


def tells_unfiltered(settings: Any) -> bool:
    """Whether the ``SCHEDULER`` of ``settings`` is a :class:`DedupScheduler`."""
    try:
        cls = load_object(settings.get("SCHEDULER"))
    except (ImportError, NameError, ValueError, TypeError):
        return False  # Scrapy reports it when it builds the scheduler
    # Not issubclass: Scrapy's scheduler metaclass answers it by duck typing.
    return isinstance(cls, type) and DedupScheduler in cls.__mro__
