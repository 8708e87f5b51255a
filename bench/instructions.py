#!/usr/bin/python3
"""Instructions per fetch, counted by callgrind: egressd with its access log to a file and
off, and the gRPC ceiling, each run under `valgrind --tool=callgrind` and counted over
sequential unary Fetch calls (h2load -c1, 1 KiB from nginx over pooled HTTP/1.1) after a
warm-up. Every thread of the process is counted; the upstream nginx is not.

Then the system calls per fetch of the same servers, counted by `strace -f -c` over the
same load: the kernel's share, which callgrind does not see (each is a trip into the
kernel; futex and epoll_wait counts are the thread hand-offs and wake-ups).

CPU time per fetch on a 2-core machine moves by 10-30 % between runs; on a quiet machine
an instruction count moves by about 1 % (under load, gRPC's polling threads move it by
more), so it shows what one change to the hot path saves. What the kernel, wake-ups and
cache misses cost in time: tools/profile.sh.
With --callers=tls, egressd serves its callers over TLS (--grpc_tls_cert, a self-signed
certificate; h2load offers h2 by ALPN) and the ceiling, which speaks cleartext only, is
left out: what the loops' TLS acceptor and stream cost per fetch.
Runs in a network namespace of its own: tools/callgrind.sh [--fetches=2000] [--egressd=PATH]
[--callers=tls] [--io_threads=1].
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


SCHEME = "http"  # "https" with --callers=tls


def h2load(frame, fetches):
    output = subprocess.run(
        ["h2load", "-n", str(fetches), "-c1", "-d", frame, "-H", "content-type: application/grpc",
         "-H", "te: trailers", f"{SCHEME}://{GRPC}/egress.v1.Egress/Fetch"],
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


SYSCALLS = ["sendmsg", "sendto", "recvmsg", "recvfrom", "read", "write", "poll", "epoll_wait",
            "epoll_ctl", "futex"]


def syscalls(argv, frame, fetches, out):
    """System calls per fetch of the server argv under load, by name, counted by strace."""
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(GRPC)
        h2load(frame, 200)
        tracer = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(server.pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)  # strace attaches to every thread
        h2load(frame, fetches)
        tracer.send_signal(subprocess.signal.SIGINT)
        tracer.wait(timeout=60)
    finally:
        server.terminate()
        server.wait(timeout=60)
    counts = {}
    with open(out) as table:
        for line in table:
            fields = line.split()
            if len(fields) >= 5 and fields[-1] in SYSCALLS and fields[3].isdigit():
                counts[fields[-1]] = int(fields[3]) / fetches
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="bazel-bin")
    parser.add_argument("--egressd", help="another egressd binary to count (default: --bin's)")
    parser.add_argument("--fetches", type=int, default=2000)
    parser.add_argument("--data_plane", choices=["loops", "grpc_library"], default="loops",
                        help="what serves egressd's Fetch calls")
    parser.add_argument("--callers", choices=["plain", "tls"], default="plain",
                        help="how the load generator reaches egressd")
    parser.add_argument("--io_threads", type=int, default=0,
                        help="egressd's event loops (transport.io_threads; 0: one per core). "
                             "With more than one, a fetch whose caller and pooled connection "
                             "sit on different loops crosses threads, and the count moves by "
                             "about 5 %% with where they landed: 1 holds it still for an A/B")
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
        if args.io_threads:
            out.write(f"transport {{ io_threads: {args.io_threads} }}\n")
    frame = grpc_frame(work, f"http://127.0.0.1:{UPSTREAM_PORT}/1k", "fetch-1k")
    egressd = [args.egressd or os.path.join(args.bin, "service/egressd"), f"--config={egress_config}",
               f"--grpc_listen={GRPC}", "--admin_listen=127.0.0.1:50052",
               "--metrics_listen=127.0.0.1:9464"]
    if args.data_plane != "loops":  # only when asked: a build before the flag refuses it
        egressd.append(f"--data_plane={args.data_plane}")
    if args.callers == "tls":
        global SCHEME
        SCHEME = "https"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{work}/grpc.key", "-out", f"{work}/grpc.pem", "-days", "2",
             "-subj", "/CN=127.0.0.1"], check=True, stderr=subprocess.DEVNULL)
        egressd += [f"--grpc_tls_cert={work}/grpc.pem", f"--grpc_tls_key={work}/grpc.key"]
    systems = {
        "egressd, access log to a file": egressd + [f"--access_log={work}/access.log"],
        "egressd, access log off": egressd + ["--access_log=off"],
    }
    if args.callers == "plain":
        systems["gRPC ceiling (fixed answer, no I/O)"] = [
            os.path.join(args.bin, "bench/grpc_ceiling"), f"--listen={GRPC}"]
    nginx = subprocess.Popen(["nginx", "-c", config, "-p", work])
    try:
        wait_for_port(f"127.0.0.1:{UPSTREAM_PORT}")
        counts = {name: instructions(argv, frame, args.fetches,
                                     os.path.join(work, f"callgrind-{i}.out"))
                  for i, (name, argv) in enumerate(systems.items())}
        calls = {name: syscalls(argv, frame, args.fetches, os.path.join(work, f"strace-{i}.out"))
                 for i, (name, argv) in enumerate(systems.items())}
    finally:
        nginx.terminate()
        nginx.wait()
    print(f"{args.fetches} sequential unary Fetch calls (h2load -c1, {args.callers} callers) "
          f"after 200 uncounted; callgrind's and strace's files in {work}\n")
    print("| system | instructions per fetch | " + " | ".join(SYSCALLS) + " |")
    print("|---|---|" + "---|" * len(SYSCALLS))
    for name, count in counts.items():
        per_call = " | ".join(f"{calls[name].get(call, 0):.2f}" for call in SYSCALLS)
        print(f"| {name} | {count / 1000:,.1f}k | {per_call} |")


if __name__ == "__main__":
    main()
