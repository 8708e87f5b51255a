#!/usr/bin/env bash
# Generates the Python stubs for egress.v1, and the google.rpc error details egressd
# returns (status_pb2, error_details_pb2), into DIR (default client/python/gen):
#   client/python/generate.sh [DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/client/python/gen}"
mkdir -p "$out"
protoc --proto_path="$root/proto" --proto_path=/usr/include \
  --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
  "$root/proto/egress/v1/egress.proto"
protoc --proto_path="$root/proto" --proto_path=/usr/include --python_out="$out" \
  "$root/proto/google/rpc/status.proto" "$root/proto/google/rpc/error_details.proto"
