# Scrapy settings for the scrapy-dedup demo project.
#
#     https://docs.scrapy.org/en/latest/topics/settings.html

BOT_NAME = "demo"

SPIDER_MODULES = ["demo.spiders"]
NEWSPIDER_MODULE = "demo.spiders"

# Obey robots.txt rules
ROBOTSTXT_OBEY = True

# Be polite: at most two requests in flight per site
CONCURRENT_REQUESTS_PER_DOMAIN = 2

# INFO shows the stats dump at the end of the crawl (dedup/* included)
# without logging every request
LOG_LEVEL = "INFO"

FEED_EXPORT_ENCODING = "utf-8"

# ---------------------------------------------------------------------------
# scrapy-dedup
# ---------------------------------------------------------------------------
# URL stage: a request whose canonical URL was already seen is not fetched
# (tracking parameters, #fragments, trailing slashes, reordered queries, ...).
DUPEFILTER_CLASS = "scrapy_dedup.CanonicalDupeFilter"

# Content stage: an item whose text is the same as, or nearly the same as, an item
# already kept is dropped (a print view, one press release under two city names).
# The spider puts the page text in the item's "text" field (DEDUP_TEXT_FIELD).
ITEM_PIPELINES = {"scrapy_dedup.ContentDedupPipeline": 350}

# rel=canonical: a page declaring <link rel="canonical"> has its items filed under
# that URL (the fetched one is kept in "fetched_url"); once a few declarations of the
# host proved right (the declared page had the same text), the canonical URL is not
# fetched again (DEDUP_CANONICAL_TRUST). 575: after HttpCompressionMiddleware (590),
# so bodies are decompressed, and after MetaRefreshMiddleware (580), so a refresh page
# is not read.
DOWNLOADER_MIDDLEWARES = {"scrapy_dedup.RelCanonicalMiddleware": 575}

# Instead of the lines above, one line turns every stage on:
# ADDONS = {"scrapy_dedup.DedupAddon": 0}

# Where the dedup state lives. "memory" (the default) forgets it at the end of the
# crawl. An SQLite file makes the next run skip pages that already gave items and
# drop texts already kept: try ./scripts/demo.sh -s DEDUP_STORE=sqlite:///demo-dedup.db
# twice (the bundled site gets a new port each run, so there only the texts repeat;
# with -a url=https://a-real-site/ the pages are skipped too). Redis shares the
# state between workers. Start a namespace over with -s DEDUP_RESET=1.
# DEDUP_STORE = "sqlite:///demo-dedup.db"
# DEDUP_STORE = "redis://localhost:6379/0"
