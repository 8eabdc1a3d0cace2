#!/usr/bin/env bash
# Set up .venv (first run only) and run the demo crawl of the bundled local site.
# Extra arguments go to `scrapy crawl`, e.g. `-a url=https://example.com/`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
cd example_project
# The report of what dedup did: example_project/demo-report.html (open it in a browser).
exec ../.venv/bin/scrapy crawl site -O demo-items.jsonl -s DEDUP_REPORT=demo-report "$@"
