"""CanonicalDupeFilter under scrapy-redis's distributed Scheduler, on a real Redis."""

from __future__ import annotations

import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.site import Site, url_stage_routes
from tests.test_crawl_url_stage import EXPECTED


# scrapy-redis (0.9.1, its latest release) still passes spider= to the stats
# collector, which Scrapy 2.19 deprecates; that is its code, not ours.
@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")
@pytest.mark.parametrize("persist", [True, False])  # False: the scheduler flushes via clear()
@pytest.mark.parametrize("store", ["memory", "redis"])
@deferred_f_from_coro_f
async def test_scrapy_redis_scheduler_with_canonical_dupefilter(
    fresh_site: Site, redis_url: str, redis_prefix: str, persist: bool, store: str
) -> None:
    fresh_site.routes.update(url_stage_routes())
    settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter",
        "REDIS_URL": redis_url,
        "SCHEDULER_QUEUE_KEY": f"{redis_prefix}:%(spider)s:requests",
        "SCHEDULER_PERSIST": persist,
        "SCHEDULER_FLUSH_ON_START": not persist,
        "SCHEDULER_IDLE_BEFORE_CLOSE": 0,
        # The shared queue with shared dedup state, as several workers would run.
        "DEDUP_STORE": redis_url if store == "redis" else "memory",
        "DEDUP_REDIS_PREFIX": redis_prefix,
    }
    result = await crawl(settings=settings, start=[fresh_site.url("/")])

    assert sorted(fresh_site.fetched()) == sorted(EXPECTED)
    assert result.stats["dedup/url/redirect_allowed"] == 1
    assert result.stats["dedup/url/filtered"] == 12
    # every request went through the shared queue in Redis
    assert result.stats["scheduler/enqueued/redis"] == len(EXPECTED)
