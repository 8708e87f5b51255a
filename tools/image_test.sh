#!/usr/bin/env bash
# The container image, for real: builds it (tools/image.sh), runs it with podman on the
# host's network next to a loopback upstream, makes Fetch calls through it with
# egressctl, and stops it with SIGTERM, which egressd must handle as PID 1.
#   tools/image_test.sh      # needs root; builds //client:egressctl, unless EGRESSCTL names one,
#                            # and the image from the egressd EGRESSD names, or one bazel builds
set -euo pipefail
cd "$(dirname "$0")/.."
tools/image.sh egressd:test
egressctl="${EGRESSCTL:-}"
if [[ -z "$egressctl" ]]; then
  bazel build //client:egressctl > /dev/null 2>&1
  egressctl="$(pwd)/bazel-bin/client/egressctl"
fi

work="$(mktemp -d)"
# Four ports bound at once, so that they differ (a closed port can be handed out again).
read -r upstream_port grpc_port admin_port metrics_port < <(/usr/bin/python3 -c '
import socket
sockets = [socket.socket() for _ in range(4)]
for s in sockets: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))')
container="egressd-image-test-$$"
cleanup() {
  podman rm -f "$container" > /dev/null 2>&1 || true
  [[ -n "${upstream:-}" ]] && kill "$upstream" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/www" && head -c 4096 /dev/urandom > "$work/www/4k"
# An HTTP/1.1 upstream that keeps connections alive (http.server's default is HTTP/1.0).
/usr/bin/python3 -c 'import functools, http.server as h, sys
h.SimpleHTTPRequestHandler.protocol_version = "HTTP/1.1"
handler = functools.partial(h.SimpleHTTPRequestHandler, directory=sys.argv[2])
h.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()' \
  "$upstream_port" "$work/www" > "$work/upstream.log" 2>&1 &
upstream=$!
echo 'policy { allow_cidrs: "127.0.0.0/8" }  # the test upstream' > "$work/egress.textproto"
chmod -R a+rX "$work"

podman run -d --name "$container" --runtime runc --network host \
  --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 \
  -v "$work/egress.textproto:/etc/egress/egress.textproto:ro" \
  egressd:test --grpc_listen="127.0.0.1:$grpc_port" --admin_listen="127.0.0.1:$admin_port" \
  --metrics_listen="127.0.0.1:$metrics_port" --config=/etc/egress/egress.textproto > /dev/null
for _ in $(seq 100); do
  (exec 3<> "/dev/tcp/127.0.0.1/$grpc_port") 2> /dev/null && break
  sleep 0.1
done

url="http://127.0.0.1:$upstream_port/4k"
for attempt in 1 2; do
  "$egressctl" --target="127.0.0.1:$grpc_port" --json fetch "$url" > "$work/fetch$attempt.json"
done
/usr/bin/python3 - "$work" "$work/www/4k" <<'PY'
import base64, json, sys
work, expected = sys.argv[1], open(sys.argv[2], "rb").read()
first, second = (json.load(open(f"{work}/fetch{i}.json")) for i in (1, 2))
for response in (first, second):
    assert response["statusCode"] == 200, response
    assert base64.b64decode(response["body"]) == expected, "body differs"
assert second["connection"]["reused"] is True, second["connection"]
print("fetches through the container: HTTP 200, 4096 bytes, second reused")
PY
"$egressctl" --admin="127.0.0.1:$admin_port" pools

podman stop -t 20 "$container" > /dev/null
exit_code="$(podman inspect --format '{{.State.ExitCode}}' "$container")"
podman logs "$container" 2>&1 | grep -q "signal 15, shutting down" \
  || { echo "egressd did not report SIGTERM"; podman logs "$container"; exit 1; }
[[ "$exit_code" == 0 ]] || { echo "egressd exited with $exit_code after SIGTERM"; exit 1; }
echo "SIGTERM: egressd shut down cleanly (exit 0)"
echo "image size: $(podman image inspect --format '{{.Size}}' egressd:test | numfmt --to=iec)"
