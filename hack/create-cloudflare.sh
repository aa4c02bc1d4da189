#!/usr/bin/env bash
# Generates the project `npm create cloudflare` (create-cloudflare, "C3", pinned here)
# makes for one framework option, on the pinned Node 22, into the per-machine cache keyed
# by the C3 version, and prints its directory.
# Usage: create-cloudflare.sh FRAMEWORK [C3 FLAGS...] (e.g. react --variant=react-ts).
# The project is kept without node_modules (package.json and package-lock.json pin
# what `npm ci` installs), so later runs are reproducible and need no network but npm's.
# C3 fetches only npm packages for the frameworks the tests use (react: create-vite;
# vue: create-vue; tanstack-start: @tanstack/cli); react-router's create-react-router
# downloads its template from GitHub.
set -euo pipefail
C3_VERSION="${C3_VERSION:-2.73.0}"
framework="${1:?usage: create-cloudflare.sh FRAMEWORK [C3 FLAGS...]}"; shift
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
here="$(cd "$(dirname "$0")" && pwd)"
node_bin="$("$here/install-node.sh")"
base="$CACHE/c3/$C3_VERSION"
dir="$base/c3-$framework"
mkdir -p "$base"
exec 9>"$base/.lock-$framework"; flock 9
if [ ! -f "$dir/package-lock.json" ]; then
  rm -rf "$dir" "$dir.tmp" && mkdir -p "$dir.tmp"
  echo "create-cloudflare@$C3_VERSION: generating --framework=$framework into $dir" >&2
  # npm_config_yes: C3 runs each framework's own generator with npx, which would ask.
  (cd "$dir.tmp" && PATH="$node_bin:$PATH" CI=1 npm_config_yes=true WRANGLER_SEND_METRICS=false \
    NO_UPDATE_NOTIFIER=1 DO_NOT_TRACK=1 npx --yes "create-cloudflare@$C3_VERSION" "c3-$framework" \
    --framework="$framework" --platform=workers --lang=ts --no-deploy --no-git --no-open \
    --no-auto-update --no-agents "$@" >&2)
  rm -rf "$dir.tmp/c3-$framework/node_modules"
  mv "$dir.tmp/c3-$framework" "$dir" && rmdir "$dir.tmp"
fi
echo "$dir"
