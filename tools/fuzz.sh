#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) and runs each for
# SECONDS (default 30) from its seed corpus in fuzz/corpus/. Prints, per target, the
# executions, coverage and any crash; fails if a target crashes. The network targets
# (transport, service, access_log, server_session) run in a network namespace with only
# loopback up.
#   tools/fuzz.sh            # 30 s each
#   tools/fuzz.sh 600        # the longer run recorded in fuzz/README.md
#   tools/fuzz.sh --build    # builds the targets only; then `tools/fuzz.sh --run 20` runs them
# FUZZ_JOBS: compiles and targets at a time (default: the number of cores); FUZZ_OUT: where
# the targets and their corpora go (default /tmp/egress-fuzz); FUZZ_GENFILES: the generated
# proto sources (default: bazel builds them and names bazel-bin/proto).
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
mkdir -p "$out"

if ((build)); then  # (to the matching fi: the build, which --run skips)
genfiles="${FUZZ_GENFILES:-}"
if [[ -z "$genfiles" ]]; then
  bazel build //proto:egress_cc_proto //proto:google_rpc_cc_proto >/dev/null 2>&1  # generated *.pb.{h,cc}
  genfiles="$(bazel info bazel-bin 2>/dev/null)/proto"
fi

# -DNDEBUG as in the shipped (-c opt) build: Boost.Beast 1.81 has a BOOST_ASSERT that
# chunked input can trip (fuzz/README.md); what counts is what egressd runs.
flags=(-std=c++17 -O1 -g -DNDEBUG -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I. -I"$genfiles" -Wno-deprecated-declarations)
absl="absl_statusor absl_strings absl_str_format absl_time absl_flat_hash_map absl_hash"
libs=(-lboost_url $(pkg-config --libs protobuf $absl absl_raw_hash_set))
net_libs=(-lboost_url -lssl -lcrypto -lcares -lnghttp2 $(pkg-config --libs $absl absl_raw_hash_set)
          -lpthread)
service_libs=($(pkg-config --libs grpc++ protobuf) -lhiredis "${net_libs[@]}")
base=(service/base/*.cc)
transport=(service/transport/http/request.cc service/transport/policy/address_policy.cc
           service/transport/http1/response_parser.cc "${base[@]}")
# The whole transport, and the gRPC front end over it, for the network targets.
all_transport=(service/transport/*.cc service/transport/*/*.cc
               "${base[@]}")
# The config's builder: one file per section of egress.v1.Config, and proto_time.
config=(service/config/*.cc)
service=(service/fetch/*.cc "${config[@]}" service/limits/body_budget.cc
         service/limits/caller_counts.cc service/limits/quotas.cc service/limits/quota_store.cc
         service/access_log/access_log.cc service/access_log/access_log_json.cc
         "$genfiles/egress/v1/egress.pb.cc" "$genfiles/egress/v1/egress.grpc.pb.cc"
         "$genfiles/google/rpc/status.pb.cc" "$genfiles/google/rpc/error_details.pb.cc"
         tests/support/fault_server.cc)

# egressd's own gRPC server session, and what it stands on.
dataplane=(service/dataplane/server_session*.cc service/dataplane/grpc_framing.cc
           service/dataplane/caller_limits.cc service/dataplane/connection_lifecycle.cc
           service/dataplane/tls_acceptor.cc)

object() { echo "$out/obj/$(echo "${1#"$genfiles"/}" | tr / _).o"; }
# Every source once, FUZZ_JOBS at a time: compiling is most of this script's time
# (serially, 7 minutes on 2 cores).
compile_all() {  # sources...
  local source running=0
  mkdir -p "$out/obj"
  for source in $(printf '%s\n' "$@" | sort -u); do
    clang++ "${flags[@]}" -c "$source" -o "$(object "$source")" &
    if ((++running >= jobs)); then wait -n; ((running--)); fi
  done
  while ((running--)); do wait -n; done
}
compile_all fuzz/*_fuzzer.cc "${all_transport[@]}" "${service[@]}" "${dataplane[@]}"

link() {  # name, sources... [-- libs...]; the default libs when none are given
  local name="$1"; shift
  local objects=() with=("${libs[@]}")
  while (($#)) && [[ "$1" != -- ]]; do objects+=("$(object "$1")"); shift; done
  if (($#)); then shift; with=("$@"); fi
  clang++ "${flags[@]}" "${objects[@]}" -o "$out/$name" "${with[@]}"
}
link request_fuzzer fuzz/request_fuzzer.cc "${transport[@]}"
link response_parser_fuzzer fuzz/response_parser_fuzzer.cc "${transport[@]}"
link config_fuzzer fuzz/config_fuzzer.cc "${config[@]}" "$genfiles/egress/v1/egress.pb.cc" \
  "${transport[@]}"
link transport_fuzzer fuzz/transport_fuzzer.cc "${all_transport[@]}" -- "${net_libs[@]}"
link http2_response_fuzzer fuzz/http2_response_fuzzer.cc "${all_transport[@]}" -- "${net_libs[@]}"
link service_fuzzer fuzz/service_fuzzer.cc "${service[@]}" "${all_transport[@]}" \
  -- "${service_libs[@]}"
link access_log_fuzzer fuzz/access_log_fuzzer.cc "${service[@]}" "${all_transport[@]}" \
  -- "${service_libs[@]}"
link server_session_fuzzer fuzz/server_session_fuzzer.cc "${dataplane[@]}" "${service[@]}" \
  "${all_transport[@]}" -- "${service_libs[@]}"
link url_redaction_fuzzer fuzz/url_redaction_fuzzer.cc service/access_log/access_log.cc \
  service/access_log/access_log_json.cc service/fetch/utf8_text.cc "$genfiles/egress/v1/egress.pb.cc" "${transport[@]}"
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
targets=(request response_parser config transport service http2_response url_redaction
         access_log server_session)
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
