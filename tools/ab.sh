#!/usr/bin/env bash
# Two egressd binaries side by side on loopback (bench/ab.py): e.g. a build of an earlier
# commit against this tree's. Needs root (a network namespace). Installs what it needs.
#   tools/ab.sh BEFORE_BINARY [AFTER_BINARY] [--connections=16] [--streams=1] [--seconds=5]
#                [--repetitions=5] [--call=fetch|stream|refused] [--callers=plain|tls]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel build //service:egressd //bench:grpc_ceiling //tests/netsim:delay_link
exec /usr/bin/python3 bench/ab.py "$@"
