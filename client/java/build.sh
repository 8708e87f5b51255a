#!/usr/bin/env bash
# Builds the Java client offline with javac and Debian's jars (libgrpc-java,
# libprotobuf-java, libnetty-java, ...): stubs from proto/egress/v1/egress.proto
# (protoc's Java generator and grpc_java_plugin) and from proto/google/rpc (Status,
# ErrorInfo, RetryInfo, package google.rpc), the client (package egress.client), its
# test and example, into DIR:
#   client/java/build.sh DIR
# DIR/classpath then holds the class path to run them with, e.g.
#   java -cp "$(cat DIR/classpath)" egress.client.Example URL [TARGET]
#   java -cp "$(cat DIR/classpath)" egress.client.EgressClientTest
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: build.sh DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -rf "$out/gen" "$out/classes" "$out/proto"
mkdir -p "$out/gen" "$out/classes"

jars=(protobuf grpc-api grpc-context grpc-core grpc-stub grpc-protobuf grpc-protobuf-lite
      grpc-netty guava geronimo-annotation-1.3-spec perfmark-api gson
      netty-buffer netty-codec netty-codec-http netty-codec-http2 netty-codec-socks
      netty-common netty-handler netty-handler-proxy netty-resolver netty-transport)
classpath=""
for jar in "${jars[@]}"; do
  [[ -f /usr/share/java/$jar.jar ]] || { echo "build.sh: no /usr/share/java/$jar.jar" >&2; exit 1; }
  classpath+=":/usr/share/java/$jar.jar"
done
classpath="$out/classes$classpath"

# protoc's Java generator gives the string field Header.value a getValueBytes() (its
# UTF-8 bytes), which collides with the accessor of the bytes field value_bytes; the
# Java stubs are made from a copy that names field 3 raw_value (the same wire format:
# names do not travel), so Header.getRawValue() is value_bytes.
mkdir -p "$out/proto/egress/v1"
sed 's/^  bytes value_bytes = 3;$/  bytes raw_value = 3;/' "$root/proto/egress/v1/egress.proto" \
  > "$out/proto/egress/v1/egress.proto"
grep -q '^  bytes raw_value = 3;$' "$out/proto/egress/v1/egress.proto" \
  || { echo "build.sh: Header.value_bytes not found in egress.proto" >&2; exit 1; }
protoc --proto_path="$out/proto" --proto_path=/usr/include \
  --java_out="$out/gen" --grpc-java_out="$out/gen" \
  --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin \
  "$out/proto/egress/v1/egress.proto"
protoc --proto_path="$root/proto" --proto_path=/usr/include --java_out="$out/gen" \
  "$root/proto/google/rpc/status.proto" "$root/proto/google/rpc/error_details.proto"
# -nowarn: the generated code's own deprecation and unchecked notes are not ours.
find "$out/gen" "$here/src" "$here/test" "$here/example" -name '*.java' > "$out/sources"
javac -nowarn -encoding UTF-8 --release 11 -d "$out/classes" -cp "$classpath" @"$out/sources"
echo "$classpath" > "$out/classpath"
