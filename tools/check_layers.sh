#!/usr/bin/env bash
# The layers of design.md, checked on the build graph: the transport (//service/transport)
# depends on no gRPC, protobuf, Prometheus, Redis client or API message, directly or
# through anything else. Visibility in //third_party/system and //proto already refuses a
# direct dependency; this catches a widened visibility list too. Prints what breaks it.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='//third_party/system:grpc + //third_party/system:grpc_reflection
  + //third_party/system:protobuf + //third_party/system:prometheus
  + //third_party/system:hiredis + //proto:*'
found=$(bazel query --noshow_progress "deps(//service/transport/...) intersect ($forbidden)")
if [[ -n "$found" ]]; then
  echo "the transport depends on what its layer may not use:" >&2
  echo "$found" >&2
  for target in $found; do
    bazel query --noshow_progress "somepath(//service/transport/..., $target)" >&2
  done
  exit 1
fi
echo "layers: //service/transport depends on no gRPC, protobuf, Prometheus, Redis or API message"
