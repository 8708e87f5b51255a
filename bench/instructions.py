#!/usr/bin/python3
"""Instructions per fetch, counted by callgrind: egressd with its access log to a file and
off, and the gRPC ceiling, each run under `valgrind --tool=callgrind` and counted over
sequential unary Fetch calls (h2load -c1, 1 KiB from nginx over pooled HTTP/1.1) after a
warm-up. Every thread of the process is counted; the upstream nginx is not.

CPU time per fetch on a 2-core machine moves by 10-30 % between runs; an instruction count
moves by well under 1 %, so it shows what one change to the hot path saves. It does not
show what the kernel, wake-ups and cache misses cost: tools/profile.sh does.
Runs in a network namespace of its own: tools/callgrind.sh [--fetches=2000] [--egressd=PATH].
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "netsim"))
from wan import readable_tempdir  # noqa: E402
from loopback import grpc_frame  # noqa: E402

UPSTREAM_PORT = 8080
GRPC = "127.0.0.1:50051"

NGINX_CONFIG = """daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 1024; }}
http {{
  client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
  access_log off;
  keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port}; root {dir}/www; }}
}}
"""


def wait_for_port(address, seconds=60):
    host, port = address.split(":")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {address}")


def h2load(frame, fetches):
    output = subprocess.run(
        ["h2load", "-n", str(fetches), "-c1", "-d", frame, "-H", "content-type: application/grpc",
         "-H", "te: trailers", f"http://{GRPC}/egress.v1.Egress/Fetch"],
        stdout=subprocess.PIPE, text=True, check=True).stdout
    if f"{fetches} succeeded" not in output or "status codes: " + str(fetches) + " 2xx" not in output:
        raise RuntimeError(f"not every fetch succeeded:\n{output}")


def instructions(argv, frame, fetches, out):
    """Instructions per fetch of the server argv under load, counted by callgrind."""
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--instr-atstart=no",
         *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(GRPC)
        h2load(frame, 200)  # connections, caches and allocator pools warm up uncounted
        subprocess.run(["callgrind_control", "--instr=on", str(server.pid)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        h2load(frame, fetches)
        subprocess.run(["callgrind_control", "--instr=off", str(server.pid)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    finally:
        server.terminate()
        if server.wait(timeout=60) is None:
            server.kill()
    with open(out) as counts:
        total = sum(int(m.group(1)) for m in re.finditer(r"^totals: (\d+)", counts.read(), re.M))
    return total / fetches


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="bazel-bin")
    parser.add_argument("--egressd", help="another egressd binary to count (default: --bin's)")
    parser.add_argument("--fetches", type=int, default=2000)
    args = parser.parse_args()
    work = readable_tempdir("egress-instructions-")
    os.makedirs(os.path.join(work, "www"))
    os.makedirs(os.path.join(work, "tmp"))
    with open(os.path.join(work, "www", "1k"), "w") as body:
        body.write("x" * 1024)
    config = os.path.join(work, "nginx.conf")
    with open(config, "w") as out:
        out.write(NGINX_CONFIG.format(dir=work, port=UPSTREAM_PORT))
    egress_config = os.path.join(work, "egress.textproto")
    with open(egress_config, "w") as out:
        out.write('policy { allow_cidrs: "127.0.0.0/8" }\n')
    frame = grpc_frame(work, f"http://127.0.0.1:{UPSTREAM_PORT}/1k", "fetch-1k")
    egressd = [args.egressd or os.path.join(args.bin, "service/egressd"), f"--config={egress_config}",
               f"--grpc_listen={GRPC}", "--admin_listen=127.0.0.1:50052",
               "--metrics_listen=127.0.0.1:9464"]
    systems = {
        "egressd, access log to a file": egressd + [f"--access_log={work}/access.log"],
        "egressd, access log off": egressd + ["--access_log=off"],
        "gRPC ceiling (fixed answer, no I/O)": [
            os.path.join(args.bin, "bench/grpc_ceiling"), f"--listen={GRPC}"],
    }
    nginx = subprocess.Popen(["nginx", "-c", config, "-p", work])
    try:
        wait_for_port(f"127.0.0.1:{UPSTREAM_PORT}")
        counts = {name: instructions(argv, frame, args.fetches,
                                     os.path.join(work, f"callgrind-{i}.out"))
                  for i, (name, argv) in enumerate(systems.items())}
    finally:
        nginx.terminate()
        nginx.wait()
    print(f"{args.fetches} sequential unary Fetch calls (h2load -c1) after 200 uncounted; "
          f"callgrind's files in {work}\n")
    print("| system | instructions per fetch |")
    print("|---|---|")
    for name, count in counts.items():
        print(f"| {name} | {count / 1000:,.1f}k |")


if __name__ == "__main__":
    main()
