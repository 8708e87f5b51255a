#!/usr/bin/env bash
# Runs the whole test suite: a normal build, then ASan+UBSan, then TSan.
# Installs what it needs first. Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh

status=0
for config in "" "--config=asan" "--config=tsan"; do
  echo "=== bazel test ${config:-(default)} //..."
  bazel test $config //... || status=1
done
bazel shutdown
exit $status
