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
  local work="$CACHE/build/k8s-$K8S_VERSION"
  mkdir -p "$work"
  if [ ! -f "$work/go.sum" ]; then
    local modfile
    modfile="$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    {
      echo "module workerd-operator.io/k8s-binaries"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes v$K8S_VERSION"
      echo
      echo "replace ("
      sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$modfile"
      echo ")"
    } >"$work/go.mod"
    cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    (cd "$work" && go mod tidy -e >/dev/null 2>&1 || true; cd "$work" && go mod download)
  fi
  local minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
  local v="k8s.io/component-base/version"
  local kl="$ldflags -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  kl="$kl -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for b in "$@"; do
    echo "control plane: building $b v$K8S_VERSION (first time only; kube-apiserver takes ~8 min on 2 cores)" >&2
    (cd "$work" && go build -tags tools -trimpath -ldflags "$kl" -o "$OUT/$b.tmp" "k8s.io/kubernetes/cmd/$b")
    mv "$OUT/$b.tmp" "$OUT/$b"
  done
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
