#!/usr/bin/env bash
# Installs the pinned workerd (npm package `workerd`) into the per-machine cache and
# prints the path of its binary on stdout.
#
#   hack/install-workerd.sh            -> prints .../workerd/<version>/bin/workerd
#
# The npm package ships a glibc x86-64/arm64 binary through its optional dependency
# @cloudflare/workerd-linux-*; we resolve that binary instead of the node wrapper so
# processes see workerd's own pid, signals and exit codes.
set -euo pipefail
WORKERD_VERSION="${WORKERD_VERSION:-1.20261117.1}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
dir="$CACHE/workerd/$WORKERD_VERSION"
bin="$dir/bin/workerd"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  exec 9>"$dir/.lock"; flock 9
  if [ ! -x "$bin" ]; then
    echo "workerd: installing npm workerd@$WORKERD_VERSION into $dir" >&2
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "workerd@$WORKERD_VERSION" >&2)
    real="$(find "$dir/node_modules/@cloudflare" -path '*/bin/workerd' -type f | head -n 1)"
    [ -n "$real" ] || { echo "workerd: no binary found under $dir/node_modules/@cloudflare" >&2; exit 1; }
    mkdir -p "$dir/bin"; ln -sf "$real" "$bin"
    "$bin" --version >&2
  fi
fi
echo "$bin"
