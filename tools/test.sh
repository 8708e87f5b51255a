#!/usr/bin/env bash
# Runs the whole test suite: a normal build with a smoke run of the benchmark
# (tools/bench.sh --smoke) and the container image built and run (tools/image_test.sh),
# then ASan+UBSan, then TSan, then a short run of each fuzz target (tools/fuzz.sh).
# Installs what it needs first. Exits non-zero when any test fails.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh || exit 1

log=$(mktemp)
status=0
for config in "" "--config=asan" "--config=tsan"; do
  echo "=== bazel test ${config:-(default config)} //... (at ${SECONDS} s)"
  # Build everything first, so that compiling does not compete with running tests.
  bazel build $config //... || { status=1; continue; }
  bazel test $config //... 2>&1 | tee -a "$log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  if [[ -z $config ]]; then  # while the optimized build is the one in bazel-bin
    echo "=== benchmark smoke run (at ${SECONDS} s)"
    if tools/bench.sh --smoke; then
      echo "bench smoke: ok" | tee -a "$log"
    else
      echo "bench smoke: FAILED" | tee -a "$log"
      status=1
    fi
    echo "=== container image (at ${SECONDS} s)"
    if tools/image_test.sh; then
      echo "container image: ok" | tee -a "$log"
    else
      echo "container image: FAILED" | tee -a "$log"
      status=1
    fi
  fi
done
echo "=== fuzz targets, 20 s each (at ${SECONDS} s)"
tools/fuzz.sh 20 | tee -a "$log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
bazel shutdown

echo "=== done (at ${SECONDS} s)"
passed=$(grep -cE '^(//\S+\s+PASSED|fuzz .*no crash$|(bench smoke|container image): ok)' "$log")
failed=$(grep -cE '^(//\S+\s+(FAILED|TIMEOUT|NO STATUS)|fuzz .*CRASH|(bench smoke|container image): FAILED)' "$log")
rm -f "$log"
echo "$passed passed, $failed failed"
exit $status
