#!/usr/bin/env bash
# Where a fetch's CPU goes (bench/profile.py): perf stat and perf record of egressd, the
# nginx gateway and the gRPC ceiling under h2load on loopback; writes
# bench/profile_egressd.svg and prints the figures. Needs root. Installs what it needs.
#   tools/profile.sh [--seconds=10] [--connections=64]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh linux-perf
bazel build //service:egressd //bench:grpc_ceiling //tests/netsim:delay_link
exec /usr/bin/python3 bench/profile.py --bin=bazel-bin "$@"
