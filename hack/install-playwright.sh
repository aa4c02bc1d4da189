#!/usr/bin/env bash
# Installs the pinned @playwright/test into the per-machine cache and prints the
# directory holding its node_modules. The browser tests run Cloudflare's Playwright specs
# with it in Debian's Chromium (hack/install-chromium.sh): Playwright's own browser
# download is never used (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD). The pin follows Debian's
# chromium: 1.60.0 is the release built against Chromium 148, the version bookworm ships.
set -euo pipefail
PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.60.0}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
dir="$CACHE/npm/playwright-$PLAYWRIGHT_VERSION"
if [ ! -x "$dir/node_modules/.bin/playwright" ]; then
  mkdir -p "$dir"
  exec 9>"$dir/.lock"; flock 9
  if [ ! -x "$dir/node_modules/.bin/playwright" ]; then
    echo "npm: installing @playwright/test@$PLAYWRIGHT_VERSION into $dir" >&2
    (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error \
      --prefix "$dir" "@playwright/test@$PLAYWRIGHT_VERSION" >&2)
  fi
fi
echo "$dir"
