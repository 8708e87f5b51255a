#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) and runs each for
# SECONDS (default 30) from its seed corpus in fuzz/corpus/. Prints, per target, the
# executions, coverage and any crash; fails if a target crashes.
#   tools/fuzz.sh            # 30 s each
#   tools/fuzz.sh 600        # the longer run recorded in fuzz/README.md
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"

bazel build //proto:egress_cc_proto >/dev/null 2>&1  # generated egress.pb.{h,cc}
genfiles="$(bazel info bazel-bin 2>/dev/null)/proto"
out="${FUZZ_OUT:-/tmp/egress-fuzz}"
mkdir -p "$out"

# -DNDEBUG as in the shipped (-c opt) build: Boost.Beast 1.81 has a BOOST_ASSERT that
# chunked input can trip (fuzz/README.md); what counts is what egressd runs.
flags=(-std=c++17 -O1 -g -DNDEBUG -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I. -I"$genfiles" -Wno-deprecated-declarations)
transport=(service/transport/request.cc service/transport/address_policy.cc
           service/transport/response_parser.cc)
absl="absl_statusor absl_strings absl_str_format absl_time absl_flat_hash_map absl_hash"
libs=(-lboost_url $(pkg-config --libs protobuf $absl absl_raw_hash_set))

build() {  # name, sources...
  local name="$1"; shift
  clang++ "${flags[@]}" "$@" -o "$out/$name" "${libs[@]}"
}
build request_fuzzer fuzz/request_fuzzer.cc "${transport[@]}"
build response_parser_fuzzer fuzz/response_parser_fuzzer.cc "${transport[@]}"
build config_fuzzer fuzz/config_fuzzer.cc service/config.cc "$genfiles/egress/v1/egress.pb.cc" \
  "${transport[@]}"

failed=0
for target in request response_parser config; do
  corpus="$out/corpus-$target"
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$target"/* "$corpus"/
  # Inputs that once crashed a target run first, every time.
  cp -n fuzz/regressions/"$target"-* "$corpus"/ 2>/dev/null || true
  log="$out/$target.log"
  if "$out/${target}_fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
      -artifact_prefix="$out/$target-" -print_final_stats=1 "$corpus" >"$log" 2>&1; then
    verdict="no crash"
  else
    verdict="CRASH (see $log)"
    failed=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  echo "fuzz ${target}: ${runs} executions in ${seconds} s, coverage ${cov} edges, ${verdict}"
done
exit "$failed"
