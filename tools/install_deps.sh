#!/usr/bin/env bash
# Installs every Debian package egressd's build and tests need. Idempotent; needs root.
set -euo pipefail

packages=(
  bazel-bootstrap g++ pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost1.81-dev libboost-url1.81-dev libssl-dev libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev
  nginx-light libnginx-mod-http-echo openssl ca-certificates iproute2 util-linux
  prometheus
  clang libclang-rt-14-dev
  golang-go gnuplot-nox nghttp2-client
)
# Node.js for the dashboard type check; a machine may already have its own.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# TypeScript and Grafana's dashboard schema, for the dashboard type check (tests have no
# network, so they are fetched here). Versions pinned for repeatable checks.
npm_dir="${EGRESS_NPM_DIR:-/opt/egress-npm}"
if [[ ! -x "$npm_dir/node_modules/.bin/tsc" || ! -d "$npm_dir/node_modules/@grafana/schema" ]]; then
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
    typescript@5.9.3 @grafana/schema@13.2.3
fi
