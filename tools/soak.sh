#!/usr/bin/env bash
# The soak (bench/soak.cc): a million mixed fetches, injected faults, hostile upstreams
# and hostile callers among them, through the egressd binary, in a network namespace of
# its own with only loopback up. egressd's RSS is sampled through the run.
#   tools/soak.sh [--fetches=N] [--callers=N] [--seconds=N] [--only=A,B] [--skip=A,B]
#   tools/soak.sh --only=endless --seconds=60 --callers=8   # RSS under endless upstreams
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //service:egressd //bench:soak >/dev/null 2>&1
exec tests/support/run_in_netns.sh bazel-bin/bench/soak --egressd=bazel-bin/service/egressd "$@"
