#!/usr/bin/env bash
# Installs the npm packages the tests bundle Workers with into the per-machine cache and
# prints the directory holding their node_modules: esbuild (the bundler) and the
# PostgreSQL drivers `postgres` and `pg` Hyperdrive Workers import.
set -euo pipefail
POSTGRES_JS_VERSION="${POSTGRES_JS_VERSION:-3.4.9}"
ESBUILD_VERSION="${ESBUILD_VERSION:-0.28.2}"
PG_VERSION="${PG_VERSION:-8.23.1}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
dir="$CACHE/npm/postgres-$POSTGRES_JS_VERSION-pg-$PG_VERSION-esbuild-$ESBUILD_VERSION"
if [ ! -x "$dir/node_modules/.bin/esbuild" ] || [ ! -f "$dir/node_modules/postgres/package.json" ] || [ ! -f "$dir/node_modules/pg/package.json" ]; then
  mkdir -p "$dir"
  exec 9>"$dir/.lock"; flock 9
  if [ ! -x "$dir/node_modules/.bin/esbuild" ] || [ ! -f "$dir/node_modules/postgres/package.json" ] || [ ! -f "$dir/node_modules/pg/package.json" ]; then
    echo "npm: installing postgres@$POSTGRES_JS_VERSION pg@$PG_VERSION esbuild@$ESBUILD_VERSION into $dir" >&2
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --prefix "$dir" \
      "postgres@$POSTGRES_JS_VERSION" "pg@$PG_VERSION" "esbuild@$ESBUILD_VERSION" >&2)
  fi
fi
echo "$dir"
