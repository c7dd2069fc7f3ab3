#!/usr/bin/env bash
# Browser end-to-end tests: installs the node dependencies if needed, then runs node's test runner.
# Needs: the jikji binary (JIKJI_BIN, default target/release/jikji), pkg/ from wasm-pack,
# a bundle (JIKJI_E2E_BUNDLE), models/e5-small, and Chromium at /usr/bin/chromium.
# See the header of browser.test.mjs for all variables.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

if [ ! -d "$HERE/node_modules/playwright-core" ]; then
  if [ -f "$HERE/package-lock.json" ]; then
    (cd "$HERE" && npm ci --no-audit --no-fund)
  else
    (cd "$HERE" && npm install --no-audit --no-fund)
  fi
fi

cd "$ROOT"
# The page as served, built anew from the sources in web/ (scripts/build-js: bundled and minified
# into pkg/web, pkg/integrity.json hashing the worker being tested, the service worker stamped).
if [ -f pkg/jikji_engine.js ]; then scripts/build-js --pkg pkg --out pkg/web; fi
# JIKJI_E2E_TESTS: the test files (default: every tests/e2e/*.test.mjs).
# shellcheck disable=SC2086
exec node --test "$@" ${JIKJI_E2E_TESTS:-tests/e2e/*.test.mjs}
