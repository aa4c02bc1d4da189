#!/usr/bin/env bash
# Builds the CNCF distribution registry (github.com/distribution/distribution/v3,
# cmd/registry) from the Go module proxy into the per-machine cache, once, and prints
# the binary's path on stdout. `make dev` and the e2e suite run it on loopback as the
# local OCI registry that `import --image` pushes to and the dev kubelet pulls from.
#
#   hack/build-registry.sh   -> prints .../registry/<version>/registry
set -euo pipefail
REGISTRY_VERSION="${REGISTRY_VERSION:-v3.0.0}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
dir="$CACHE/registry/$REGISTRY_VERSION"
bin="$dir/registry"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  exec 9>"$dir/.lock"; flock 9
  if [ ! -x "$bin" ]; then
    echo "registry: building github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION into $dir" >&2
    GOBIN="$dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
      go install "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION" >&2
  fi
fi
echo "$bin"
