#!/usr/bin/python3
"""Stalled FetchStreams over HTTP/2 (issue 38): one caller on one gRPC connection opens
N FetchStreams to an h2c upstream (nginx, a 6 MiB body) and never reads. Prints
egressd's resident memory before and with them open, egress_buffered_body_bytes, and
how the fetches ended (held a stream, or RESOURCE_EXHAUSTED with its reason).

    bazel build //service:egressd
    /usr/bin/python3 bench/stalled_streams.py --streams 1200 --budget_mib 64

Loopback only. The caller's gRPC takes little ahead of its reads (no BDP probing, a
16 KiB lookahead), so that egressd's writes to it wait, as for a caller that stalls.
"""

import argparse
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

import grpc  # Debian's python3-grpcio, for /usr/bin/python3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def gauge(metrics_port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    match = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def fetch_request(url):
    # egress.v1.FetchRequest{url = 2}, encoded by hand: no generated stubs needed.
    data = url.encode()
    length, varint = len(data), b""
    while True:
        byte = length & 0x7F
        length >>= 7
        varint += bytes([byte | (0x80 if length else 0)])
        if not length:
            break
    return b"\x12" + varint + data


def wait_until(check, seconds):
    give_up = time.time() + seconds
    while time.time() < give_up:
        if check():
            return True
        time.sleep(0.1)
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=1200)
    parser.add_argument("--budget_mib", type=int, default=64)
    parser.add_argument("--egressd", default="bazel-bin/service/egressd")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="egress-stalled-")
    os.makedirs(f"{work}/www", exist_ok=True)
    with open(f"{work}/www/6m", "wb") as body:
        body.write(os.urandom(6 << 20))
    h2c, grpc_port, admin_port, metrics_port = (free_port() for _ in range(4))
    with open(f"{work}/nginx.conf", "w") as conf:
        conf.write(f"""daemon off; worker_processes 1; error_log {work}/error.log; pid {work}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
  access_log off; client_body_temp_path {work}; proxy_temp_path {work};
  fastcgi_temp_path {work}; uwsgi_temp_path {work}; scgi_temp_path {work};
  http2_max_concurrent_streams 128;
  server {{ listen 127.0.0.1:{h2c} http2; root {work}/www; }}
}}
""")
    budget = args.budget_mib << 20
    with open(f"{work}/egress.conf", "w") as conf:
        conf.write(f"""policy {{ disabled: true }}
transport {{ max_conns_per_origin: 64 http2 {{ mode: HTTP2_MODE_PRIOR_KNOWLEDGE }} }}
limits {{ buffered_body_budget_bytes: {budget} max_body_bytes_ceiling: {min(budget, 64 << 20)}
          default_max_body_bytes: {min(budget, 8 << 20)} }}
""")
    nginx = subprocess.Popen(["nginx", "-c", f"{work}/nginx.conf", "-p", work])
    egressd = subprocess.Popen(
        [args.egressd, f"--grpc_listen=127.0.0.1:{grpc_port}",
         f"--admin_listen=127.0.0.1:{admin_port}", f"--metrics_listen=127.0.0.1:{metrics_port}",
         f"--config={work}/egress.conf", "--access_log=off"],
        stdout=subprocess.DEVNULL)
    try:
        channel = grpc.insecure_channel(
            f"127.0.0.1:{grpc_port}",
            options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16384)])
        grpc.channel_ready_future(channel).result(timeout=10)
        stream = channel.unary_stream("/egress.v1.Egress/FetchStream")
        # One small fetch first: the connection and the warm state, before the baseline.
        for _ in stream(fetch_request(f"http://127.0.0.1:{h2c}/missing"), timeout=10):
            pass
        time.sleep(1)
        before = rss_bytes(egressd.pid)
        request = fetch_request(f"http://127.0.0.1:{h2c}/6m")
        calls = [stream(request, timeout=600) for _ in range(args.streams)]
        ended = {}

        def watch(call):
            # Returns when the call ends: refused, or cancelled below. Reads nothing.
            ended[id(call)] = (call.code(), call.details())

        watchers = [threading.Thread(target=watch, args=(c,), daemon=True) for c in calls]
        for watcher in watchers:
            watcher.start()
        peak_rss = before
        last, same = -1, 0
        give_up = time.time() + 120
        while same < 10 and time.time() < give_up:  # settled: 2 s without change
            time.sleep(0.2)
            peak_rss = max(peak_rss, rss_bytes(egressd.pid))
            now = (len(ended), gauge(metrics_port, "egress_buffered_body_bytes"))
            same = same + 1 if now == last else 0
            last = now
        held_rss = rss_bytes(egressd.pid)
        buffered = gauge(metrics_port, "egress_buffered_body_bytes")
        reasons = {}
        for code, details in ended.values():
            key = f"{code.name}: {details[:110]}"
            reasons[key] = reasons.get(key, 0) + 1
        print(f"{args.streams} stalled FetchStreams over h2c, budget {budget} bytes "
              f"({args.budget_mib} MiB)")
        print(f"egressd RSS: {before / 2**20:.1f} MiB before, {held_rss / 2**20:.1f} MiB with "
              f"them open (peak {peak_rss / 2**20:.1f}): +{(peak_rss - before) / 2**20:.1f} MiB")
        print(f"egress_buffered_body_bytes: {buffered:.0f}")
        print(f"held open: {args.streams - len(ended)}; ended:")
        for key, count in sorted(reasons.items()):
            print(f"  {count} x {key}")
        for call in calls:
            call.cancel()
        wait_until(lambda: gauge(metrics_port, "egress_buffered_body_bytes") == 0, 30)
        print("after cancelling: egress_buffered_body_bytes "
              f"{gauge(metrics_port, 'egress_buffered_body_bytes'):.0f}")
    finally:
        egressd.terminate()
        egressd.wait()
        nginx.terminate()
        nginx.wait()


if __name__ == "__main__":
    main()
