#!/usr/bin/python3
"""Two egressd binaries side by side on loopback (issue 15's before and after): each with
its access log to a file and off, beside the nginx gateway and the gRPC ceiling, under
the same h2load load, in one run; medians of the repetitions. Prints markdown.

    tools/ab.sh BEFORE_BINARY [AFTER_BINARY] [--connections=16] [--streams=1] [--seconds=5]
                [--repetitions=5] [--call=fetch|stream|refused] [--callers=plain|tls]

AFTER_BINARY defaults to this tree's bazel-bin/service/egressd. --call says what both
egressd are called with (the gateway and the ceiling rows stay 1 KiB fetches):
  fetch    Fetch of 1 KiB from the upstream (the default)
  stream   FetchStream of the same 1 KiB
  refused  Fetch of an ftp:// URL, refused with INVALID_ARGUMENT before the transport:
           what gRPC and the service layer cost without any upstream I/O
--callers=tls serves both egressd over TLS (--grpc_tls_cert, h2 by ALPN) and puts the
gateway's TLS listener in the gateway's row; the ceiling stays plain (it has no TLS).
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "netsim"))
from wan import Wan, readable_tempdir  # noqa: E402
from loopback import FETCH_PATH, FETCH_STREAM_PATH, Loopback, grpc_frame  # noqa: E402
from run import Tools  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default="bazel-bin/service/egressd")
    parser.add_argument("--bin", default="bazel-bin")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--streams", type=int, default=1,
                        help="h2load -m: calls in flight on each connection")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--call", choices=["fetch", "stream", "refused"], default="fetch")
    parser.add_argument("--callers", choices=["plain", "tls"], default="plain")
    args = parser.parse_args()
    work = readable_tempdir("egress-ab-")
    tools = Tools(args.bin, None, work)
    pki = os.path.dirname(tools.ca)  # its server certificate names 127.0.0.1
    tls = ([f"--grpc_tls_cert={pki}/server.pem", f"--grpc_tls_key={pki}/server.key"]
           if args.callers == "tls" else [])
    variants = {}
    for label, binary in (("before", args.before), ("after", args.after)):
        binary = os.path.abspath(binary)
        variants[f"{label}, access log to a file"] = (
            binary, [f"--access_log={os.path.join(work, label + '.log')}", *tls])
        variants[f"{label}, access log off"] = (binary, ["--access_log=off", *tls])
    gateway = "gateway-callers-tls" if args.callers == "tls" else "gateway"
    systems = list(variants) + [gateway, "ceiling"]
    runs = {system: [] for system in systems}
    with Wan(tools.delay_link, rtt_ms=0) as wan:
        loopback = Loopback(wan, wan.CLIENT, tools, work, variants)
        call = {"fetch": (FETCH_PATH, loopback.fetch_frame, True),
                "stream": (FETCH_STREAM_PATH, loopback.fetch_frame, True),
                "refused": (FETCH_PATH, grpc_frame(work, "ftp://127.0.0.1/1k", "refused"),
                            False)}[args.call]
        for system in variants:  # the pools warm up
            loopback.h2load(system, args.connections, args.streams, 2, call)
        for _ in range(args.repetitions):
            for system in systems:
                runs[system].append(
                    loopback.h2load(system, args.connections, args.streams, args.seconds, call))
    print(f"h2load -c{args.connections} -m{args.streams}, {args.seconds} s per run, "
          f"{args.repetitions} repetitions, {args.callers} callers, "
          f"egressd called with --call={args.call}, the gateway and the ceiling "
          "with a 1 KiB fetch; medians (each variant's standard error: "
          f"{loopback.dir}/variant-N.stderr, N in the order of the rows)\n")
    print("| system | requests/s | CPU us per request (server processes) | p50 ms |")
    print("|---|---|---|---|")
    for system in systems:
        median = lambda key: statistics.median(run[key] for run in runs[system])  # noqa: E731
        print(f"| {system} | {median('rps'):,.0f} | {median('cpu_per_10k') * 100:.1f} | "
              f"{median('p50'):.2f} |")


if __name__ == "__main__":
    main()
