#!/usr/bin/env bash
# Set up .venv (first run only) and run the whole test suite.
# Tests that need Redis start their own redis-server on a free port, or use
# DEDUP_TEST_REDIS_URL when it is set.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
exec .venv/bin/python -m pytest "$@"
