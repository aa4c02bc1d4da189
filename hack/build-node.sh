#!/usr/bin/env bash
# Builds the binaries of a real Kubernetes node (test/realnode, docs/real-node.md) from
# the Go module proxy, once per machine, and installs the Debian packages it needs.
#
#   hack/build-node.sh [binary ...]   (default: all)
#
# Binaries: kubelet, kube-proxy       -> $CACHE/k8s/v$K8S_VERSION/
#           containerd, containerd-shim-runc-v2, ctr -> $CACHE/containerd/v$CONTAINERD_VERSION/
#           coredns (kubernetes, errors, log plugins only) -> $CACHE/coredns/v$COREDNS_VERSION/
#           metrics-server (the resource metrics API HPAs read) -> $CACHE/metrics-server/v$METRICS_SERVER_VERSION/
# Packages: runc, containernetworking-plugins, iptables (apt-get, only when root and
#           missing; without root a missing package is reported and the script fails).
#
# kubelet and kube-proxy come from the same kind of wrapper module as the control plane
# (hack/build-control-plane.sh explains why): k8s.io/kubernetes with its staging modules
# replaced by their published tags. containerd has a Go module of its own with main
# packages and no replace directives, so a plain wrapper that requires it is enough.
set -euo pipefail
# shellcheck source=hack/lib/k8s-wrapper.sh
source "$(dirname "$0")/lib/k8s-wrapper.sh"

K8S_VERSION="${K8S_VERSION:-1.37.2}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-2.4.2}"
COREDNS_VERSION="${COREDNS_VERSION:-1.15.0}"
METRICS_SERVER_VERSION="${METRICS_SERVER_VERSION:-0.8.0}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
K8S_OUT="$CACHE/k8s/v$K8S_VERSION"
CTD_OUT="$CACHE/containerd/v$CONTAINERD_VERSION"
DNS_OUT="$CACHE/coredns/v$COREDNS_VERSION"
MS_OUT="$CACHE/metrics-server/v$METRICS_SERVER_VERSION"
STAGING_VERSION="v0.${K8S_VERSION#1.}"
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(packages kubelet kube-proxy containerd containerd-shim-runc-v2 ctr coredns metrics-server)

out_of() {
  case "$1" in
    kubelet|kube-proxy) echo "$K8S_OUT/$1" ;;
    containerd|containerd-shim-runc-v2|ctr) echo "$CTD_OUT/$1" ;;
    coredns) echo "$DNS_OUT/$1" ;;
    metrics-server) echo "$MS_OUT/$1" ;;
    *) echo "unknown binary $1" >&2; exit 2 ;;
  esac
}

# Debian packages: runc (the OCI runtime), the CNI plugins (bridge, host-local,
# loopback, portmap) and iptables (kube-proxy's backend).
ensure_packages() {
  local need=()
  command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables-restore >/dev/null 2>&1 || [ -x /usr/sbin/iptables-restore ] || need+=(iptables)
  [ ${#need[@]} -gt 0 ] || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "node: missing Debian packages ${need[*]} (not root: install them with apt-get install ${need[*]})" >&2
    return 1
  fi
  echo "node: apt-get install ${need[*]}" >&2
  # One apt at a time on a shared machine; apt itself also locks.
  (
    flock 8
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
      || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
  ) 8>"$CACHE/.apt.lock"
}

mkdir -p "$K8S_OUT" "$CTD_OUT" "$DNS_OUT" "$MS_OUT"
missing=()
pkgs=0
for b in "${want[@]}"; do
  if [ "$b" = packages ]; then pkgs=1; continue; fi
  [ -x "$(out_of "$b")" ] || missing+=("$b")
done
[ $pkgs = 0 ] || ensure_packages
if [ ${#missing[@]} -eq 0 ]; then
  echo "node: cached in $K8S_OUT, $CTD_OUT, $DNS_OUT and $MS_OUT" >&2
  exit 0
fi
# One builder at a time per machine.
exec 9>"$CACHE/.node-build.lock"
flock 9

export GOFLAGS="-mod=mod"
export CGO_ENABLED=0
ldflags="-s -w"

build_k8s() {
  build_k8s_wrapped "$CACHE/build/k8s-node-$K8S_VERSION" workerd-operator.io/k8s-node-binaries "$K8S_OUT" node "kube-proxy kubelet" "$@"
}

build_containerd() {
  local work="$CACHE/build/containerd-$CONTAINERD_VERSION"
  local mod="github.com/containerd/containerd/v2"
  mkdir -p "$work"
  if [ ! -f "$work/go.sum" ]; then
    cat >"$work/go.mod" <<MOD
module workerd-operator.io/containerd-binaries

go 1.26

require $mod v$CONTAINERD_VERSION
MOD
    cat >"$work/tools.go" <<GO
//go:build tools

package tools

import (
	_ "$mod/cmd/containerd"
	_ "$mod/cmd/containerd-shim-runc-v2"
	_ "$mod/cmd/ctr"
)
GO
    (cd "$work" && go mod tidy -e >/dev/null 2>&1 || true; cd "$work" && go mod download)
  fi
  local kl="$ldflags -X $mod/version.Version=v$CONTAINERD_VERSION -X $mod/version.Package=$mod"
  for b in "$@"; do
    echo "node: building $b v$CONTAINERD_VERSION (first time only)" >&2
    (cd "$work" && go build -tags tools,no_btrfs -trimpath -ldflags "$kl" -o "$CTD_OUT/$b.tmp" "$mod/cmd/$b")
    mv "$CTD_OUT/$b.tmp" "$CTD_OUT/$b"
  done
}

build_coredns() {
  local work="$CACHE/build/coredns-$COREDNS_VERSION"
  local mod="github.com/coredns/coredns"
  mkdir -p "$work"
  if [ ! -f "$work/go.sum" ]; then
    cat >"$work/go.mod" <<MOD
module workerd-operator.io/coredns-binary

go 1.26

require $mod v$COREDNS_VERSION
MOD
    cat >"$work/main.go" <<GO
// Command coredns is CoreDNS with only the plugins the real node uses.
package main

import (
	_ "$mod/core/dnsserver"
	"$mod/coremain"
	_ "$mod/plugin/errors"
	_ "$mod/plugin/kubernetes"
	_ "$mod/plugin/log"
)

func main() { coremain.Run() }
GO
    (cd "$work" && go mod tidy >/dev/null)
  fi
  echo "node: building coredns v$COREDNS_VERSION (first time only)" >&2
  (cd "$work" && go build -trimpath -ldflags "$ldflags -X $mod/coremain.GitCommit=v$COREDNS_VERSION" -o "$DNS_OUT/coredns.tmp" .)
  mv "$DNS_OUT/coredns.tmp" "$DNS_OUT/coredns"
}

# metrics-server's module has no replace directives: go install builds it as released.
build_metrics_server() {
  local tmp="$MS_OUT/.gobin"
  echo "node: building metrics-server v$METRICS_SERVER_VERSION (first time only)" >&2
  rm -rf "$tmp"
  GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" "sigs.k8s.io/metrics-server/cmd/metrics-server@v$METRICS_SERVER_VERSION"
  mv "$tmp/metrics-server" "$MS_OUT/metrics-server"
  rm -rf "$tmp"
}

k8s=(); ctd=(); dns=(); ms=()
for b in "${missing[@]}"; do
  [ -x "$(out_of "$b")" ] && continue # built by another builder while we waited
  case "$b" in
    kubelet|kube-proxy) k8s+=("$b") ;;
    coredns) dns+=("$b") ;;
    metrics-server) ms+=("$b") ;;
    *) ctd+=("$b") ;;
  esac
done
[ ${#k8s[@]} -eq 0 ] || build_k8s "${k8s[@]}"
[ ${#ctd[@]} -eq 0 ] || build_containerd "${ctd[@]}"
[ ${#dns[@]} -eq 0 ] || build_coredns
[ ${#ms[@]} -eq 0 ] || build_metrics_server
echo "node: ready in $K8S_OUT, $CTD_OUT, $DNS_OUT and $MS_OUT" >&2
