#!/usr/bin/env bash
# Installs every Debian package egressd's build and tests need. Idempotent; needs root.
set -euo pipefail

packages=(
  bazel-bootstrap g++ pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost1.81-dev libboost-url1.81-dev libssl-dev libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev
  nginx-light libnginx-mod-http-echo openssl ca-certificates iproute2 util-linux
)

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
