# Sourced by hack/build-control-plane.sh and hack/build-node.sh: builds binaries of
# k8s.io/kubernetes through a wrapper module that requires it and replaces its staging
# modules by their published tags (k8s.io/kubernetes cannot be required with its
# ./staging replace directives). Needs K8S_VERSION, STAGING_VERSION and ldflags.
#
#   build_k8s_wrapped WORK MODULE OUT LABEL "CMD ..." BINARY...
#
# WORK is the wrapper's directory, MODULE its module path, OUT where binaries go, LABEL
# prefixes the log lines, CMD ... are the k8s.io/kubernetes/cmd packages the wrapper
# imports (so go.sum covers them), BINARY... the ones to build now.
build_k8s_wrapped() {
  local work="$1" module="$2" out="$3" label="$4" cmds="$5"
  shift 5
  mkdir -p "$work"
  if [ ! -f "$work/go.sum" ]; then
    k8s_wrapper_module "$work" "$module" "$cmds"
    (cd "$work" && go mod tidy -e >/dev/null 2>&1 || true; cd "$work" && go mod download)
  fi
  local minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
  local v="k8s.io/component-base/version"
  local kl="$ldflags -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  kl="$kl -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for b in "$@"; do
    echo "$label: building $b v$K8S_VERSION (first time only; takes minutes on 2 cores)" >&2
    (cd "$work" && go build -tags tools -trimpath -ldflags "$kl" -o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b")
    mv "$out/$b.tmp" "$out/$b"
  done
}

# k8s_wrapper_module WORK MODULE "CMD ..." writes WORK/go.mod and WORK/tools.go.
k8s_wrapper_module() {
  local work="$1" module="$2" cmds="$3" modfile c
  modfile="$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module $module"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$modfile"
    echo ")"
  } >"$work/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in $cmds; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } >"$work/tools.go"
}
