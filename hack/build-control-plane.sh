#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries used by the envtest suites and by
# the local cluster (`make dev`) from the Go module proxy, once per machine.
#
#   hack/build-control-plane.sh [binary ...]   (default: all)
#
# Binaries: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubectl.
# Output:   ${WORKERD_OPERATOR_CACHE:-~/.cache/workerd-operator}/k8s/v${K8S_VERSION}/
#
# Why a wrapper module: k8s.io/kubernetes replaces its 33 staging modules with
# ./staging paths, so `go install k8s.io/kubernetes/cmd/...@v` refuses. The wrapper
# requires k8s.io/kubernetes and replaces every staging module with its published
# v0.x tag. etcd's server module likewise has no main package of its own.
set -euo pipefail
# shellcheck source=hack/lib/k8s-wrapper.sh
source "$(dirname "$0")/lib/k8s-wrapper.sh"

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
OUT="$CACHE/k8s/v$K8S_VERSION"
STAGING_VERSION="v0.${K8S_VERSION#1.}"
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

mkdir -p "$OUT"
missing=()
for b in "${want[@]}"; do [ -x "$OUT/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "control plane: cached in $OUT" >&2
  exit 0
fi
# One builder at a time per machine (make dev and make test may race).
exec 9>"$OUT/.lock"
flock 9

export GOFLAGS="-mod=mod"
export CGO_ENABLED=0
ldflags="-s -w"

build_k8s() {
  build_k8s_wrapped "$CACHE/build/k8s-$K8S_VERSION" workerd-operator.io/k8s-binaries "$OUT" "control plane" "kube-apiserver kube-controller-manager kube-scheduler kubectl" "$@"
}

build_etcd() {
  local work="$CACHE/build/etcd-$ETCD_VERSION"
  mkdir -p "$work"
  cat >"$work/go.mod" <<MOD
module workerd-operator.io/etcd-binary

go 1.26

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
MOD
  cat >"$work/main.go" <<'GO'
// Command etcd is etcd's own server entry point (go.etcd.io/etcd/server/v3/etcdmain).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  echo "control plane: building etcd v$ETCD_VERSION" >&2
  (cd "$work" && go mod tidy >/dev/null && go build -trimpath -ldflags "$ldflags" -o "$OUT/etcd.tmp" .)
  mv "$OUT/etcd.tmp" "$OUT/etcd"
}

k8s=()
for b in "${missing[@]}"; do
  case "$b" in
    etcd) build_etcd ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) k8s+=("$b") ;;
    *) echo "unknown binary $b" >&2; exit 2 ;;
  esac
done
[ ${#k8s[@]} -eq 0 ] || build_k8s "${k8s[@]}"
echo "control plane: ready in $OUT" >&2
