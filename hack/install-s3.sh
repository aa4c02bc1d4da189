#!/usr/bin/env bash
# Builds the S3-compatible server that `make dev` and the R2 tests store objects in
# (versitygw, Apache-2.0, its posix backend) from its Go module into the per-machine
# cache, once, and prints the path of the binary on stdout.
#
#   hack/install-s3.sh            -> prints .../bin/versitygw-<version>
set -euo pipefail
VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
bin="$CACHE/bin/versitygw-$VERSITYGW_VERSION"
if [ ! -x "$bin" ]; then
  mkdir -p "$CACHE/bin" "$CACHE/build"
  exec 9>"$CACHE/build/versitygw.lock"; flock 9
  if [ ! -x "$bin" ]; then
    echo "s3: building github.com/versity/versitygw@$VERSITYGW_VERSION into $bin" >&2
    tmp="$(mktemp -d "$CACHE/build/versitygw.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" >&2
    mv "$tmp/versitygw" "$bin"
  fi
fi
echo "$bin"
