#!/usr/bin/python3
"""HTTP/2 body throughput of two egressd builds side by side (issue 38: the first stream
window): 20 FetchStreams of a 16 MiB body and 200 of 100 KiB over h2c (nginx on
loopback), per round, the two binaries alternating; medians of wall time and egressd CPU.

    /usr/bin/python3 bench/h2_body_ab.py --a OLD_EGRESSD --b NEW_EGRESSD --rounds 16

Run it inside `unshare -n` (with `ip link set lo up`) to keep other loopback traffic out.
bench/ab.py compares two binaries under h2load with 1 KiB bodies from an HTTP/1.1
upstream; this one reads large bodies from an HTTP/2 upstream to their end, where a
stream's flow-control window decides the pace.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stalled_streams import free_port, fetch_request  # noqa: E402
import grpc  # noqa: E402  Debian's python3-grpcio, for /usr/bin/python3

parser = argparse.ArgumentParser()
parser.add_argument("--a", required=True, help="an egressd binary")
parser.add_argument("--b", required=True, help="another egressd binary")
parser.add_argument("--rounds", type=int, default=8)
args = parser.parse_args()
binaries = {"a": args.a, "b": args.b}
work = tempfile.mkdtemp(prefix="egress-ab-")
os.makedirs(f"{work}/www")
for name, size in (("16m", 16 << 20), ("100k", 100 << 10)):
    with open(f"{work}/www/{name}", "wb") as f:
        f.write(os.urandom(size))
h2c = free_port()
with open(f"{work}/nginx.conf", "w") as conf:
    conf.write(f"""daemon off; worker_processes 1; error_log {work}/error.log; pid {work}/nginx.pid;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {work}; proxy_temp_path {work};
  fastcgi_temp_path {work}; uwsgi_temp_path {work}; scgi_temp_path {work};
  server {{ listen 127.0.0.1:{h2c} http2; root {work}/www; }} }}
""")
with open(f"{work}/egress.conf", "w") as conf:
    conf.write("""policy { disabled: true }
transport { http2 { mode: HTTP2_MODE_PRIOR_KNOWLEDGE } }
""")
nginx = subprocess.Popen(["nginx", "-c", f"{work}/nginx.conf", "-p", work])
procs, stubs = {}, {}
for name, path in binaries.items():
    g, a, m = free_port(), free_port(), free_port()
    procs[name] = subprocess.Popen([path, f"--grpc_listen=127.0.0.1:{g}", f"--admin_listen=127.0.0.1:{a}",
                                    f"--metrics_listen=127.0.0.1:{m}", f"--config={work}/egress.conf",
                                    "--access_log=off"], stdout=subprocess.DEVNULL)
    ch = grpc.insecure_channel(f"127.0.0.1:{g}", options=[("grpc.max_receive_message_length", 64 << 20)])
    grpc.channel_ready_future(ch).result(timeout=10)
    stubs[name] = ch.unary_stream("/egress.v1.Egress/FetchStream")

def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def run(name, path, count):
    req = fetch_request(f"http://127.0.0.1:{h2c}/{path}")
    c0, t0 = cpu(procs[name].pid), time.perf_counter()
    total = 0
    for _ in range(count):
        for chunk in stubs[name](req, timeout=60):
            total += len(chunk)
    return time.perf_counter() - t0, cpu(procs[name].pid) - c0, total

try:
    for name in binaries: run(name, "100k", 5)  # warm
    results = {(n, p): [] for n in binaries for p in ("16m", "100k")}
    rounds = args.rounds
    for r in range(rounds):
        order = list(binaries) if r % 2 == 0 else list(binaries)[::-1]
        for name in order:
            for path, count in (("16m", 20), ("100k", 200)):
                results[(name, path)].append(run(name, path, count))
    for (name, path), rs in results.items():
        walls = sorted(x[0] for x in rs); cpus = sorted(x[1] for x in rs)
        count = 20 if path == "16m" else 200
        size = (16 << 20) if path == "16m" else (100 << 10)
        mibs = [count * size / w / 2**20 for w in walls]
        print(f"{name} ({binaries[name]}) {count} x {path}: wall median {statistics.median(walls):.3f} s "
              f"(min {walls[0]:.3f}, max {walls[-1]:.3f}), {statistics.median(mibs):.0f} MiB/s median; "
              f"egressd CPU median {statistics.median(cpus):.2f} s")
finally:
    for p in procs.values(): p.terminate(); p.wait()
    nginx.terminate(); nginx.wait()
