#!/usr/bin/env bash
# Runs the whole test suite: a normal build with a smoke run of the benchmark
# (tools/bench.sh --smoke) and the container image built and run (tools/image_test.sh),
# then ASan+UBSan, then TSan, and a short run of each fuzz target (tools/fuzz.sh; built
# by the ASan build, run beside the TSan tests).
# Installs what it needs first. Exits non-zero when any test fails.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh || exit 1

log=$(mktemp)
work=$(mktemp -d)
status=0
phase() { echo "=== $* (at ${SECONDS} s)"; }
record() {  # name, command...: runs it and logs "name: ok" or "name: FAILED"
  local name="$1"; shift
  if "$@"; then echo "$name: ok" | tee -a "$log"; else echo "$name: FAILED" | tee -a "$log"; status=1; fi
}
test_all() {  # bazel test arguments...
  ${BAZEL:-bazel} test --build_tests_only "$@" 2>&1 | tee -a "$log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
}
# Builds PATTERN's targets but its libraries (unless nothing in PATTERN links one) and,
# as `bazel build` does, those tagged manual (the fuzz targets, made by tools/fuzz.sh): a
# cc_library asked for by name also makes a shared library, from a second, position-
# independent compile of its sources and of every library it depends on (tests/support's
# fixtures alone pulled in 89 such compiles), which nothing here links: binaries and
# tests link statically (--dynamic_mode=off). Each library is now compiled once, for
# what links it. (test_all's --build_tests_only asks for the tests alone, likewise.)
# BAZEL names the Bazel server (default: the workspace's own output base).
build_all() {  # pattern, bazel build arguments...
  local pattern="$1" targets; shift
  targets=$(${BAZEL:-bazel} query --noimplicit_deps "let all = $pattern except attr(tags, '\\bmanual\\b', $pattern) in let linked = \$all except kind(cc_library, \$all)
    in \$linked + (kind(cc_library, \$all) except deps(\$linked))") || return 1
  ${BAZEL:-bazel} build "$@" $targets
}

# The sanitizer builds cover the tests and what they run, not the benchmark tools, nor
# the test of how the clients install (tagged no_sanitizer); TSan leaves out the tests
# that start no thread too (tagged single_threaded, checked by
# tools/check_single_threaded.sh): its reports are about threads. Each has a Bazel server and
# output base of its own (kept between runs like the default one; no bazel-* symlinks, so
# bazel-bin stays the default build's), so that it compiles while the default build's
# tests run.
asan_filters=(--build_tag_filters=-no_sanitizer --test_tag_filters=-no_sanitizer)
tsan_filters=(--build_tag_filters=-no_sanitizer,-single_threaded
  --test_tag_filters=-no_sanitizer,-single_threaded)
asan_bazel="bazel --output_base=$(tools/output_base.sh asan)"
tsan_bazel="bazel --output_base=$(tools/output_base.sh tsan)"

# Runs a command with its output in $work/NAME.log, then leaves its exit status in
# $work/NAME.status (written whole: a reader never sees it half-written).
background_step() {  # name, command...
  local name="$1"; shift
  "$@" > "$work/$name.log" 2>&1
  echo $? > "$work/$name.tmp" && mv "$work/$name.tmp" "$work/$name.status"
}

phase "layers"
record "layers" tools/check_layers.sh
phase "bazel test (default config) //..."
# Build everything first, so that compiling does not compete with running tests.
if build_all //...; then
  # Then, in the background at idle priority (SCHED_IDLE: any test's thread that wakes
  # takes the core at once), the ASan build, the fuzz targets (from the ASan build's
  # objects) and the TSan build, in the order they are needed: they take only what the
  # tests, the benchmark smoke runs and the container image leave. Then the fuzz targets
  # (when they built) run, one at a time at nice 10, beside the TSan tests, which leave
  # most of the two cores idle. (test.sh runs as root: leaving SCHED_IDLE takes it.)
  chrt --idle 0 bash -c "work='$work'; $(declare -f build_all background_step)
    BAZEL='$asan_bazel' background_step asan-build \
      build_all //tests/... --config=asan --symlink_prefix=/ ${asan_filters[*]}
    BAZEL='$asan_bazel' background_step fuzz-build tools/fuzz.sh --build
    BAZEL='$tsan_bazel' background_step tsan-build \
      build_all //tests/... --config=tsan --symlink_prefix=/ ${tsan_filters[*]}
    [[ \$(cat '$work/fuzz-build.status') == 0 ]] &&
      background_step fuzz-run chrt --other 0 nice -n 10 env FUZZ_JOBS=1 tools/fuzz.sh --run 20" &
  background_builds=$!
  test_all //...
  record "single_threaded tag" tools/check_single_threaded.sh
else
  status=1
fi
phase "the clients' tests against --data_plane=grpc_library"
# The five clients' live tests again, with gRPC's library server serving them: it stays
# as the reference the loops (the default) are held to, and as an operator's fallback.
test_all --test_env=EGRESS_TEST_DATA_PLANE=grpc_library //tests/e2e:clients_test
phase "benchmark smoke run"
record "bench smoke" tools/bench.sh --smoke
record "isolation bench smoke" tools/bench.sh --isolation --smoke
record "http2 bench smoke" tools/bench.sh --http2 --smoke
# The image (mostly downloads) is built and run while the ASan build finishes, not
# beside any test. It holds the egressd this build made, with the optimized egressctl.
phase "container image, in the background"
EGRESSD="$PWD/bazel-bin/service/egressd" EGRESSCTL="$PWD/bazel-bin/client/egressctl" \
  tools/image_test.sh > "$work/image.log" 2>&1 &
image=$!

# Waits for one background step (asan-build, fuzz-build, tsan-build, fuzz-run): true when it
# succeeded; its log is printed when it did not.
background_step_ok() {  # name
  while [[ ! -e "$work/$1.status" && -n ${background_builds:-} ]] \
    && kill -0 "$background_builds" 2> /dev/null; do
    sleep 1
  done
  [[ "$(cat "$work/$1.status" 2> /dev/null)" == 0 ]] && return 0
  cat "$work/$1.log" 2> /dev/null
  return 1
}
# Runs a sanitizer's tests, building them at normal priority first when its background
# build did not succeed (or never started, when the default build failed).
sanitizer_tests() {  # name (asan or tsan), its bazel command
  local name="$1" sanitizer_bazel="$2"
  local -n filters="${name}_filters"
  phase "bazel build --config=$name //tests/... (in the background since the default build)"
  local built=1
  background_step_ok "$name-build" || built=0
  # Its server was started at idle priority: it (and what it starts) returns to normal.
  chrt --other --all-tasks -p 0 "$($sanitizer_bazel info server_pid)"
  if ((!built)); then
    BAZEL="$sanitizer_bazel" build_all //tests/... --config="$name" --symlink_prefix=/ \
      "${filters[@]}" || status=1
  fi
  if [[ -n ${image:-} ]]; then
    phase "waiting for the container image"
    wait "$image"; local image_status=$?
    cat "$work/image.log"
    record "container image" test "$image_status" -eq 0
    image=
  fi
  # Two tests at a time once no build is left in the background (the TSan build is
  # done): nothing then uses the time that tests, one at a time, leave idle (85 % of two
  # cores for tests/integration/egressd). While a build is, one at a time (.bazelrc).
  local jobs=1
  [[ -e "$work/tsan-build.status" ]] && jobs=2
  phase "bazel test --config=$name //tests/..., $jobs at a time"
  BAZEL="$sanitizer_bazel" test_all --config="$name" --symlink_prefix=/ "${filters[@]}" \
    --local_test_jobs="$jobs" //tests/...
  $sanitizer_bazel shutdown  # its memory, for what runs next
}
sanitizer_tests asan "$asan_bazel"
sanitizer_tests tsan "$tsan_bazel"

phase "fuzz targets, 20 s each (beside the TSan tests)"
if background_step_ok fuzz-build; then
  background_step_ok fuzz-run > /dev/null
  tee -a "$log" < "$work/fuzz-run.log"
  fuzz_status=$(cat "$work/fuzz-run.status" 2> /dev/null || echo 1)
else  # built and run here, when the background build did not make them
  tools/fuzz.sh 20 | tee -a "$log"
  fuzz_status=${PIPESTATUS[0]}
fi
# A target that crashes prints its own line; one that does not build would count nowhere.
[[ $fuzz_status -eq 0 ]] || { echo "fuzz targets: FAILED" | tee -a "$log"; status=1; }
bazel shutdown

phase "done"
passed=$(grep -cE '^(//\S+\s+PASSED|fuzz .*no crash$|((isolation |http2 )?bench smoke|container image|single_threaded tag): ok)' "$log")
failed=$(grep -cE '^(//\S+\s+(FAILED|TIMEOUT|NO STATUS)|fuzz .*CRASH|((isolation |http2 )?bench smoke|container image|single_threaded tag|fuzz targets): FAILED)' "$log")
rm -rf "$log" "$work"
echo "$passed passed, $failed failed"
exit $status
