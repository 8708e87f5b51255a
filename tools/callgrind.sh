#!/usr/bin/env bash
# Instructions (callgrind) and system calls (strace) per fetch, bench/instructions.py:
# egressd with its access log on and off, and the gRPC ceiling, in a network namespace
# with only loopback up. Needs root. Installs what it needs.
#   tools/callgrind.sh [--fetches=2000] [--egressd=ANOTHER_BUILD] [--data_plane=grpc_library]
#                      [--callers=tls] [--io_threads=1]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh valgrind strace
bazel build //service:egressd //bench:grpc_ceiling
exec unshare --net -- bash -c 'ip link set lo up && exec /usr/bin/python3 bench/instructions.py "$@"' \
  instructions "$@"
