#!/usr/bin/env bash
# The soak (bench/soak.cc): a million mixed fetches, injected faults among them, through
# the egressd binary, in a network namespace of its own with only loopback up.
#   tools/soak.sh [--fetches=N] [--callers=N]
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //service:egressd //bench:soak >/dev/null 2>&1
exec tests/support/run_in_netns.sh bazel-bin/bench/soak --egressd=bazel-bin/service/egressd "$@"
