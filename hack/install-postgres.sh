#!/usr/bin/env bash
# Installs Debian's postgresql package when it is missing and this runs as root (the
# Hyperdrive tests start a real PostgreSQL from it; internal/testenv StartPostgres).
# Prints the directory of initdb and postgres on stdout, or nothing when PostgreSQL is
# not installed and cannot be (not root): the tests then skip with a message.
set -euo pipefail
find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
dir="$(find_bin)"
if [ -z "$dir" ] && [ "$(id -u)" = 0 ]; then
  exec 9>/tmp/workerd-operator-install-postgres.lock; flock 9
  dir="$(find_bin)"
  if [ -z "$dir" ]; then
    echo "postgres: apt-get install postgresql" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2; }
    dir="$(find_bin)"
  fi
fi
[ -n "$dir" ] && echo "$dir"
exit 0
