#!/usr/bin/env bash
# Runs the whole test suite: a normal build with a smoke run of the benchmark
# (tools/bench.sh --smoke) and the container image built and run (tools/image_test.sh),
# then ASan+UBSan, then TSan, then a short run of each fuzz target (tools/fuzz.sh; they
# compile beside the normal build's tests).
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
# Builds PATTERN's targets but its libraries (unless nothing in PATTERN links one): a
# cc_library asked for by name also makes a shared library, from a second, position-
# independent compile of its sources and of every library it depends on (tests/support's
# fixtures alone pulled in 89 such compiles), which nothing here links: binaries and
# tests link statically (--dynamic_mode=off). Each library is now compiled once, for
# what links it. (test_all's --build_tests_only asks for the tests alone, likewise.)
# BAZEL names the Bazel server (default: the workspace's own output base).
build_all() {  # pattern, bazel build arguments...
  local pattern="$1" targets; shift
  targets=$(${BAZEL:-bazel} query "let all = $pattern in let linked = \$all except kind(cc_library, \$all)
    in \$linked + (kind(cc_library, \$all) except deps(\$linked))") || return 1
  ${BAZEL:-bazel} build "$@" $targets
}

# The sanitizer builds cover the tests and what they run, not the benchmark tools, nor
# the test of how the clients install (tagged no_sanitizer).
sanitized=(--build_tag_filters=-no_sanitizer --test_tag_filters=-no_sanitizer)
tsan_bazel="bazel --output_base=${XDG_CACHE_HOME:-$HOME/.cache}/egress-tsan-bazel/$(pwd | md5sum | cut -c1-12)"

phase "layers"
record "layers" tools/check_layers.sh
phase "bazel test (default config) //..."
# Build everything first, so that compiling does not compete with running tests.
if build_all //...; then
  # The fuzz targets compile (clang, outside Bazel, into /tmp/egress-fuzz) on the core the
  # tests leave idle: one compile at a time, at idle priority (SCHED_IDLE: any test's
  # thread that wakes takes the core at once), from the proto sources of this build.
  cp -rL bazel-bin/proto "$work/proto"
  FUZZ_JOBS=1 FUZZ_GENFILES="$work/proto" chrt --idle 0 tools/fuzz.sh --build \
    > "$work/fuzz-build.log" 2>&1 &
  fuzz_build=$!
  # The TSan build compiles likewise, from here to its tests, in a Bazel server of its own
  # (its own output base, kept between runs like the default one; no bazel-* symlinks, so
  # bazel-bin stays this build's): at idle priority it takes only what the tests, the
  # benchmark smoke runs and the ASan build leave, and one test runs at a time.
  BAZEL="$tsan_bazel" chrt --idle 0 bash -c "$(declare -f build_all); build_all //tests/... \
    --config=tsan --symlink_prefix=/ ${sanitized[*]}" > "$work/tsan-build.log" 2>&1 &
  tsan_build=$!
  test_all //...
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

# The image is built (mostly downloads) and run while the ASan build compiles, not beside
# any test. It holds the egressd this build made, and its egressctl is the optimized one:
# copies, because the sanitizer builds replace bazel-bin's.
phase "container image, in the background"
cp bazel-bin/service/egressd bazel-bin/client/egressctl "$work/"
EGRESSD="$work/egressd" EGRESSCTL="$work/egressctl" tools/image_test.sh > "$work/image.log" 2>&1 &
image=$!

phase "bazel build --config=asan //tests/..."
build_all //tests/... --config=asan "${sanitized[@]}" || status=1
phase "waiting for the container image"
wait "$image"; image_status=$?
cat "$work/image.log"
record "container image" test "$image_status" -eq 0
phase "bazel test --config=asan //tests/..."
test_all --config=asan "${sanitized[@]}" //tests/...

phase "bazel build --config=tsan //tests/... (in the background since the default build)"
if [[ -n ${tsan_build:-} ]] && wait "$tsan_build"; then
  # Its tests run at normal priority: the server's threads (and what it starts) return to it.
  chrt --other --all-tasks -p 0 "$($tsan_bazel info server_pid)"
else
  cat "$work/tsan-build.log"
  BAZEL="$tsan_bazel" build_all //tests/... --config=tsan --symlink_prefix=/ "${sanitized[@]}" || status=1
fi
phase "bazel test --config=tsan //tests/..."
BAZEL="$tsan_bazel" test_all --config=tsan --symlink_prefix=/ "${sanitized[@]}" //tests/...
phase "fuzz targets, 20 s each"
fuzz=(tools/fuzz.sh 20)  # builds and runs them, when the default build failed
if [[ -n ${fuzz_build:-} ]]; then
  if wait "$fuzz_build"; then fuzz=(tools/fuzz.sh --run 20); else cat "$work/fuzz-build.log"; fuzz=(false); fi
fi
"${fuzz[@]}" | tee -a "$log"
# A target that crashes prints its own line; one that does not build would count nowhere.
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "fuzz targets: FAILED" | tee -a "$log"; status=1; }
bazel shutdown
$tsan_bazel shutdown

phase "done"
passed=$(grep -cE '^(//\S+\s+PASSED|fuzz .*no crash$|((isolation |http2 )?bench smoke|container image): ok)' "$log")
failed=$(grep -cE '^(//\S+\s+(FAILED|TIMEOUT|NO STATUS)|fuzz .*CRASH|((isolation |http2 )?bench smoke|container image|fuzz targets): FAILED)' "$log")
rm -rf "$log" "$work"
echo "$passed passed, $failed failed"
exit $status
