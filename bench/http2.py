#!/usr/bin/python3
"""The HTTP/2 benchmark (issue 19), over the simulated WAN at RTT 25 ms, in one run:

1. 64 concurrent fetches to one origin, from a fresh egressd (empty pool), 10 rounds of
   64 (h2load: one gRPC connection carrying 64 calls at a time), with transport.http2 OFF
   (HTTP/1.1: a connection per fetch in flight) and AUTO (h2 by ALPN: one connection for
   all). Connections counted by nginx; ms per fetch (h2load's median latency); CPU per
   fetch of egressd and the upstream nginx together.
2. The connection table's rows (bench/run.py), 10 sequential fetches each, head only
   (BODY_MODE_NONE): drain FIXED over HTTP/1.1 against HTTP/2, where an unread body costs
   a RST_STREAM instead of a drain.

Rewrites its section of bench/RESULTS.md; bench/run.py provides the tools.

    tools/bench.sh --http2            # about 3 minutes; rewrites bench/RESULTS.md
    tools/bench.sh --http2 --smoke    # a few fetches per row; prints, writes nothing
"""

import datetime
import os
import statistics
import subprocess
import time

from run import (TABLE_ROWS, Upstream, machine, replace_section, spread, start,
                 upstream_url)
# bench/run.py has put tests/netsim on the path.
from wan import Wan, measure_rtt_ms, readable_tempdir, stop  # noqa: E402
from loopback import cpu_seconds, grpc_frame, nginx_pids, read_latencies_ms  # noqa: E402

RTT_MS = 25
HTTP2_PORT = 8444  # the same locations as bench/run.py's upstream, with http2 on
EGRESSD_GRPC = "127.0.0.1:50251"
FETCH_PATH = "/egress.v1.Egress/Fetch"
CONCURRENCY = 64
PROTOCOLS = [("HTTP/1.1", "HTTP2_MODE_OFF"), ("HTTP/2", "HTTP2_MODE_AUTO")]

BEGIN = "<!-- bench/http2.py: begin (generated; edit the script, not this) -->"
END = "<!-- bench/http2.py: end -->"


class Plan:
    def __init__(self, smoke):
        self.rounds = 1 if smoke else 40
        self.table_requests = 3 if smoke else 10
        self.repetitions = 1 if smoke else 3


def main():
    args, work, tools = start("egress-http2-")
    plan = Plan(args.smoke)
    started = datetime.datetime.now()
    configs = {mode: tools.config(f"http2-{mode}", "",
                                  f"http2 {{ mode: {mode} }} max_idle_per_origin: 200")
               for _, mode in PROTOCOLS}
    concurrent = {}
    table = {}
    with Wan(tools.delay_link, rtt_ms=RTT_MS) as wan:
        rtt = measure_rtt_ms(wan)
        upstream = Upstream(wan, work, http2_port=HTTP2_PORT)
        frames = readable_tempdir("frames-", work)
        frame = grpc_frame(frames, upstream_url("/cl/1024", HTTP2_PORT), "fetch-1k")
        for repetition in range(plan.repetitions):
            for name, mode in PROTOCOLS:
                concurrent.setdefault(name, []).append(upstream.measure(
                    lambda: concurrent_fetches(wan, tools, configs[mode], frame, plan.rounds,
                                               upstream), "/cl/1024"))
                for row, path, gap in TABLE_ROWS:
                    table.setdefault((row, name), []).append(upstream.measure(
                        lambda: tools.fetches_through_egressd(wan, configs[mode], [
                            f"--url={upstream_url(path, HTTP2_PORT)}",
                            f"--requests={plan.table_requests}", f"--gap_ms={gap}"]), path))
            print(f"repetition {repetition + 1}: done", flush=True)
    lines = report(plan, rtt, concurrent, table, started)
    if args.smoke:
        print("\n".join(lines))
        return
    replace_section(args.results, "\n".join(lines) + "\n", BEGIN, END)
    print(f"wrote {args.results}")


def concurrent_fetches(wan, tools, config, frame, rounds, upstream):
    """A fresh egressd; h2load sends rounds * CONCURRENCY Fetch calls, CONCURRENCY at a
    time on one gRPC connection. Returns what Upstream.measure expects, and the figures."""
    egressd = wan.spawn(wan.CLIENT, [tools.egressd, f"--config={config}",
                                     f"--grpc_listen={EGRESSD_GRPC}", "--access_log=off"],
                        stderr=subprocess.DEVNULL)
    try:
        host, port = EGRESSD_GRPC.split(":")
        wan.wait_for_port(wan.CLIENT, host, int(port))
        requests = rounds * CONCURRENCY
        log = os.path.join(tools.work, "h2load-http2.log")
        if os.path.exists(log):
            os.remove(log)
        pids = [egressd.pid] + nginx_pids(upstream.process.pid)
        cpu = cpu_seconds(pids)
        began = time.monotonic()
        output = wan.run(wan.CLIENT, [
            "h2load", f"-n{requests}", "-c1", f"-m{CONCURRENCY}", f"--log-file={log}",
            "-d", frame, "-H", "content-type: application/grpc", "-H", "te: trailers",
            f"http://{EGRESSD_GRPC}{FETCH_PATH}"], stdout=subprocess.PIPE, text=True,
            check=True).stdout
        total_ms = (time.monotonic() - began) * 1000
        cpu = cpu_seconds(pids) - cpu
        latencies = read_latencies_ms(log)
        if len(latencies) != requests:
            raise RuntimeError(f"h2load: {len(latencies)} of {requests} succeeded\n{output}")
        return {"requests": requests, "failed": 0, "p50_ms": statistics.median(latencies),
                "cpu_us": cpu / requests * 1e6, "total_ms": total_ms}
    finally:
        stop(egressd)


def report(plan, rtt, concurrent, table, started):
    lines = [BEGIN, "", "## HTTP/2 to upstreams over the simulated WAN (issue 19)", "",
             "Command: `tools/bench.sh --http2` (rewrites this section).",
             f"Machine: {machine()}; {started:%Y-%m-%d}. RTT {RTT_MS} ms (measured "
             f"{rtt:.2f} ms). Upstream: nginx, HTTPS with TLS 1.3, `http2` on its listener;",
             "egressd's transport.http2.mode OFF (HTTP/1.1) or AUTO (h2 by ALPN), drain FIXED.",
             f"Each figure: median of {plan.repetitions} runs, (min–max) when they differ.", "",
             f"### {CONCURRENCY} concurrent fetches to one origin",
             "",
             f"A fresh egressd (empty pool) per run; h2load sends {plan.rounds} rounds of "
             f"{CONCURRENCY} unary Fetch calls (1 KiB each) on one gRPC connection, "
             f"{CONCURRENCY} in flight. New connections as nginx counted them; ms per fetch is "
             "h2load's median latency; CPU per fetch counts egressd and the upstream nginx.", "",
             "| protocol | new connections | ms per fetch (p50) | total ms | CPU us per fetch |",
             "|---|---|---|---|---|"]
    for name, _ in PROTOCOLS:
        runs = concurrent[name]
        lines.append(f"| {name} | {spread([r['new_connections'] for r in runs])} | "
                     f"{spread([r['p50_ms'] for r in runs], 2)} | "
                     f"{spread([r['total_ms'] for r in runs])} | "
                     f"{spread([r['cpu_us'] for r in runs], 1)} |")
    lines += ["", "### The connection table over HTTP/2", "",
              f"{plan.table_requests} sequential head-only fetches (BODY_MODE_NONE) per row "
              "from a fresh egressd: over HTTP/1.1 the unread body is drained (FIXED: 256 KiB "
              "or 50 ms) or the connection closed; over HTTP/2 its stream is reset and the "
              "connection carries the next fetch.", "",
              "| body | HTTP/1.1: new connections | HTTP/1.1: ms per request | "
              "HTTP/2: new connections | HTTP/2: ms per request |",
              "|---|---|---|---|---|"]
    for row, _, _ in TABLE_ROWS:
        cells = []
        for name, _ in PROTOCOLS:
            runs = table[(row, name)]
            cells += [spread([r["new_connections"] for r in runs]),
                      spread([r["fetch_ms"] / r["requests"] for r in runs], 1)]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    lines += ["", END]
    return lines


if __name__ == "__main__":
    main()
