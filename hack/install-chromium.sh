#!/usr/bin/env bash
# Installs Debian's chromium package when it is missing and this runs as root (the
# browser tests drive it with Playwright; internal/testenv RunSpec). Prints the path of
# the chromium binary on stdout, or nothing when Chromium is not installed and cannot be
# (not root): the browser tests then skip, saying how to install it.
set -euo pipefail
find_bin() { command -v chromium 2>/dev/null || true; }
bin="$(find_bin)"
if [ -z "$bin" ] && [ "$(id -u)" = 0 ]; then
  exec 9>/tmp/workerd-operator-install-chromium.lock; flock 9
  bin="$(find_bin)"
  if [ -z "$bin" ]; then
    echo "chromium: apt-get install chromium" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2; }
    bin="$(find_bin)"
  fi
fi
[ -n "$bin" ] && echo "$bin"
exit 0
