#!/usr/bin/env bash
# Makes DIR a GOPATH workspace for the Go client, offline, with Debian's Go packages
# (module mode, as a project uses it: client/go/goproxy.py):
#   client/go/generate.sh DIR
# DIR/src/egress.internal/client, the module's path, links to client/go's sources, and
# its egress/egressv1 gets the stubs protoc-gen-go and protoc-gen-go-grpc generate from
# proto/egress/v1/egress.proto. Then, with DIR absolute:
#   export GO111MODULE=off GOPATH=DIR:/usr/share/gocode GOPROXY=off GOFLAGS=
#   go test egress.internal/client/egress && go run egress.internal/client/example URL [TARGET]
# google.rpc.ErrorInfo and RetryInfo come from Debian's golang-google-genproto-dev
# (google.golang.org/genproto/googleapis/rpc/errdetails), which grpc-go already links for
# google.rpc.Status: generating proto/google/rpc again would register the same proto
# files twice, and protobuf-go refuses that at start-up.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: generate.sh DIR}"
module=egress.internal/client
mkdir -p "$out/src/$module/egress/egressv1" "$out/src/$module/example"
out="$(cd "$out" && pwd)"
import="Megress/v1/egress.proto=$module/egress/egressv1"
protoc --proto_path="$root/proto" --proto_path=/usr/include \
  --go_out="$out/src" --go_opt="$import" \
  --go-grpc_out="$out/src" --go-grpc_opt="$import" \
  "$root/proto/egress/v1/egress.proto"
rm -f "$out/src/$module"/egress/*.go "$out/src/$module"/example/*.go
for f in "$here"/egress/*.go; do ln -sf "$f" "$out/src/$module/egress/"; done
for f in "$here"/example/*.go; do ln -sf "$f" "$out/src/$module/example/"; done
