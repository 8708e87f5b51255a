#!/usr/bin/env bash
# Builds the libFuzzer targets (//fuzz, in Bazel's --config=asan: clang, ASan + UBSan,
# the objects of the ASan test build) and runs each for SECONDS (default 30) from its
# seed corpus in fuzz/corpus/. Prints, per target, the executions, coverage and any crash;
# fails if a target crashes. The network targets (transport, service, access_log,
# server_session) run in a network namespace with only loopback up.
#   tools/fuzz.sh            # 30 s each
#   tools/fuzz.sh 600        # the longer run recorded in fuzz/README.md
#   tools/fuzz.sh --build    # builds the targets only; then `tools/fuzz.sh --run 20` runs them
# FUZZ_JOBS: targets at a time (default: the number of cores); FUZZ_OUT: where the
# corpora, logs and crashing inputs go (default /tmp/egress-fuzz); BAZEL: the Bazel
# command of the ASan build (default: the output base tools/test.sh gives it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=1 run=1
case "${1:-}" in
  --build) run=0; shift ;;
  --run) build=0; shift ;;
esac
seconds="${1:-30}"
jobs="${FUZZ_JOBS:-$(nproc)}"
out="${FUZZ_OUT:-/tmp/egress-fuzz}"
bazel_asan="${BAZEL:-bazel --output_base=$(tools/output_base.sh asan)}"
mkdir -p "$out"
# One target per fuzz/NAME_fuzzer.cc (fuzz/BUILD names each with its dependencies).
targets=($(cd fuzz && ls *_fuzzer.cc | sed 's/_fuzzer\.cc$//'))
if ((build)); then  # the targets, linked into $out
  $bazel_asan build --config=asan --symlink_prefix=/ $(printf '//fuzz:%s_fuzzer ' "${targets[@]}")
  bin="$($bazel_asan info --config=asan bazel-bin)/fuzz"
  for target in "${targets[@]}"; do ln -sf "$bin/${target}_fuzzer" "$out/${target}_fuzzer"; done
fi
((run)) || exit 0

# Runs one target; its line of results goes to $out/$target.result.
fuzz_one() {  # target
  local target="$1" corpus="$out/corpus-$1" log="$out/$1.log" verdict
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$target"/* "$corpus"/ || true  # coreutils 9.2+: 1 when it skipped one
  # Inputs that once crashed a target run first, every time.
  cp -n fuzz/regressions/"$target"-* "$corpus"/ 2>/dev/null || true
  local run=("$out/${target}_fuzzer") extra=()
  [[ -f fuzz/$target.dict ]] && extra+=(-dict="fuzz/$target.dict")
  case "$target" in transport|service|access_log|server_session)
    run=(tests/support/run_in_netns.sh "${run[@]}")
    extra+=(-malloc_limit_mb=256)  # one allocation past it is a finding
  esac
  if "${run[@]}" -max_total_time="$seconds" -max_len=4096 -timeout=10 "${extra[@]}" \
      -artifact_prefix="$out/$target-" -print_final_stats=1 "$corpus" >"$log" 2>&1; then
    verdict="no crash"
  else
    verdict="CRASH (see $log)"
  fi
  local runs cov
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  echo "fuzz ${target}: ${runs} executions in ${seconds} s, coverage ${cov} edges, ${verdict}" \
    >"$out/$target.result"
}

# FUZZ_JOBS targets at a time (each fuzzes on one thread).
running=0
for target in "${targets[@]}"; do
  rm -f "$out/$target.result"
  fuzz_one "$target" &
  if ((++running >= jobs)); then wait -n || true; ((running--)); fi
done
wait
failed=0
for target in "${targets[@]}"; do
  cat "$out/$target.result" 2>/dev/null || echo "fuzz ${target}: CRASH (no result)"
  grep -q "no crash$" "$out/$target.result" 2>/dev/null || failed=1
done
exit "$failed"
