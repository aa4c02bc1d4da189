#!/usr/bin/env bash
# Builds Prometheus' promtool (github.com/prometheus/prometheus/cmd/promtool, the
# version go.mod pins) from the Go module proxy into the per-machine cache, once, and
# prints the binary's path on stdout. The chart's alert rules are checked and unit-tested
# with it (`promtool test rules`, internal/chart). remove_all_sd leaves out the service
# discovery plugins promtool does not need for rules.
#
#   hack/build-promtool.sh   -> prints .../promtool/<version>/promtool
set -euo pipefail
cd "$(dirname "$0")/.."
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
dir="$CACHE/promtool/$PROMETHEUS_VERSION"
bin="$dir/promtool"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  exec 9>"$dir/.lock"; flock 9
  if [ ! -x "$bin" ]; then
    echo "promtool: building github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION into $dir" >&2
    GOBIN="$dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
      go install -tags remove_all_sd "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" >&2
  fi
fi
echo "$bin"
