#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine, then run it.
#   bash scripts/test.sh [pytest args...]
# Python deps come from pyproject's `test` extra; the real upstream servers the end-to-end tests
# run (npm packages in package.json) go into ./node_modules; system packages (a browser for the
# page tests) come from apt when missing. Re-running is cheap: every step skips what is present.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [ -f package.json ] && command -v npm >/dev/null; then
    npm install --no-audit --no-fund --loglevel=error >/dev/null
fi

# Headless Chromium for the browser tests (tests/e2e/test_browser.py), driven by Playwright with
# executable_path=/usr/bin/chromium: Debian's package, since Playwright's own browser download is
# not reachable here. apt-get update runs once, only when something is missing.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

exec python3 -m pytest -q "$@"
