#!/usr/bin/env bash
# Builds llama.cpp's llama-server (an OpenAI-compatible inference server) once into the
# per-machine cache and prints the path of the binary on stdout; the AI tests start it
# with a tiny generated model (internal/testenv StartLlamaServer). Prints nothing when
# it cannot be built here (no cmake and not root to install it): the tests then skip.
#
#   hack/install-llama.sh   -> prints .../llama/<version>/bin/llama-server
#
# The source comes from npm, the one registry besides Go's and Debian's the machines
# reach: node-llama-cpp ships llama.cpp as a git bundle (package/llama/gitRelease.bundle).
# Beside the binary goes llama.cpp's LLaMA SentencePiece vocabulary
# (ggml-vocab-llama-spm.gguf), the tokenizer of the generated model.
set -euo pipefail
NODE_LLAMA_CPP_VERSION="${NODE_LLAMA_CPP_VERSION:-3.22.1}"
CACHE="${WORKERD_OPERATOR_CACHE:-$HOME/.cache/workerd-operator}"
dir="$CACHE/llama/$NODE_LLAMA_CPP_VERSION"
bin="$dir/bin/llama-server"
vocab="$dir/ggml-vocab-llama-spm.gguf"
have() { [ -x "$bin" ] && [ -f "$vocab" ]; }

# missing_tools lists the Debian packages of the build tools this machine lacks.
missing_tools() {
  command -v cmake >/dev/null || echo cmake
  command -v c++ >/dev/null || echo g++
  command -v make >/dev/null || echo make
  command -v git >/dev/null || echo git
}

build() {
  local tgz
  work="$(mktemp -d)" # global: the EXIT trap reads it
  trap 'rm -rf "$work"' EXIT
  echo "llama: building llama-server from npm node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir" >&2
  tgz="$(cd "$work" && npm pack --silent --loglevel=error "node-llama-cpp@$NODE_LLAMA_CPP_VERSION")"
  tar -xzf "$work/$tgz" -C "$work" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  cat "$work/package/llama/llama.cpp.info.json" >&2
  git -c advice.detachedHead=false clone -q "$work/package/llama/gitRelease.bundle" "$work/src"
  # CPU only and not tuned to this CPU (GGML_NATIVE=OFF: ggml's x86 default, AVX2/FMA,
  # which any CI machine has), static llama/ggml libraries, no HTTPS, no OpenMP runtime,
  # and no web UI: its assets are not in the bundle and LLAMA_USE_PREBUILT_UI would
  # download them from Hugging Face.
  cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
  cmake --build "$work/build" --target llama-server -j "${LLAMA_BUILD_JOBS:-2}" >&2
  cp "$work/src/models/ggml-vocab-llama-spm.gguf" "$vocab"
  mkdir -p "$dir/bin"
  cp "$work/build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
  "$bin" --version >&2
}

if ! have; then
  missing="$(missing_tools)"
  if [ -n "$missing" ] && [ "$(id -u)" != 0 ]; then
    echo "llama: not root and missing" $missing "to build llama-server" >&2
    exit 0
  fi
  mkdir -p "$dir"
  exec 9>"$dir/.lock"; flock 9
  if ! have; then
    missing="$(missing_tools)"
    if [ -n "$missing" ]; then
      echo "llama: apt-get install" $missing >&2
      # shellcheck disable=SC2086
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >&2 ||
        { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >&2; }
    fi
    build
  fi
fi
have && echo "$bin"
exit 0
