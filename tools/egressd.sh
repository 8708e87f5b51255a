#!/usr/bin/env bash
# Builds egressd and runs it in the foreground with its built-in defaults (or the flags
# given). Installs what it needs first. Stop it with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel build //service:egressd
exec bazel-bin/service/egressd "$@"
