#!/usr/bin/env bash
# Generates the Java stubs of egress.v1 (protoc's Java generator and grpc_java_plugin) and
# of google.rpc (Status, ErrorInfo, RetryInfo) from the repository's proto/ into DIR:
#   client/java/generate-stubs.sh DIR
# build.sh and pom.xml (generate-sources) both run it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: generate-stubs.sh DIR}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out" "$work/egress/v1"

# protoc's Java generator gives the string field Header.value a getValueBytes() (its
# UTF-8 bytes), which collides with the accessor of the bytes field value_bytes; the
# Java stubs are made from a copy that names field 3 raw_value (the same wire format:
# names do not travel), so Header.getRawValue() is value_bytes.
sed 's/^  bytes value_bytes = 3;$/  bytes raw_value = 3;/' "$root/proto/egress/v1/egress.proto" \
  > "$work/egress/v1/egress.proto"
grep -q '^  bytes raw_value = 3;$' "$work/egress/v1/egress.proto" \
  || { echo "generate-stubs.sh: Header.value_bytes not found in egress.proto" >&2; exit 1; }
protoc --proto_path="$work" --proto_path=/usr/include \
  --java_out="$out" --grpc-java_out="$out" \
  --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin \
  "$work/egress/v1/egress.proto"
protoc --proto_path="$root/proto" --proto_path=/usr/include --java_out="$out" \
  "$root/proto/google/rpc/status.proto" "$root/proto/google/rpc/error_details.proto"
