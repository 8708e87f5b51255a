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
out="${1:?usage: build.sh DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -rf "$out/classes"
mkdir -p "$out/classes"

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

"$here/generate-stubs.sh" "$out/gen"
# -nowarn: the generated code's own deprecation and unchecked notes are not ours.
find "$out/gen" "$here/src" "$here/test" "$here/example" -name '*.java' > "$out/sources"
javac -nowarn -encoding UTF-8 --release 11 -d "$out/classes" -cp "$classpath" @"$out/sources"
echo "$classpath" > "$out/classpath"
