#!/usr/bin/env bash
# The benchmark (bench/run.py): builds what it measures, then runs every scenario over a
# simulated WAN and rewrites its section of bench/RESULTS.md and bench/wan_rtt.png.
#   tools/bench.sh            # the full run
#   tools/bench.sh --smoke    # a few requests per scenario, results printed only (CI)
#   tools/bench.sh --lifecycle [--smoke]   # only issue 16's rows (bench/lifecycle.py)
#   tools/bench.sh --isolation [--smoke]   # only issue 18's rows (bench/isolation.py)
#   tools/bench.sh --http2 [--smoke]       # only issue 19's rows (bench/http2.py)
#   tools/bench.sh --loopback [--smoke]    # only the loopback tables, printed
# Needs root (network namespaces, TUN devices). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel build //service:egressd //bench:sequential_fetches //bench:grpc_ceiling \
  //tests/netsim:delay_link
go_client="$(mktemp -d)/go_client"
(cd bench/go_client && GOCACHE="${GOCACHE:-/tmp/egress-go-cache}" GO111MODULE=off \
  go build -o "$go_client" main.go)
script=bench/run.py
if [[ "${1:-}" == --lifecycle ]]; then
  script=bench/lifecycle.py
  shift
elif [[ "${1:-}" == --isolation ]]; then
  script=bench/isolation.py
  shift
elif [[ "${1:-}" == --http2 ]]; then
  script=bench/http2.py
  shift
fi
exec /usr/bin/python3 "$script" --bin=bazel-bin --go_client="$go_client" "$@"
