#!/usr/bin/python3
"""The connection-lifecycle benchmark (issue 16), over the simulated WAN at RTT 25 ms, in
one run: POSTs to an upstream whose keep-alive timeout is about the callers' idle gaps
(egressd honouring the server's Keep-Alive hints, ignoring them, and the Go client), and
new TLS connections with and without session resumption. Rewrites its section of
bench/RESULTS.md; bench/run.py provides the link, the upstream and the tools.

    tools/bench.sh --lifecycle            # about 10 minutes; rewrites bench/RESULTS.md
    tools/bench.sh --lifecycle --smoke    # a few requests per row; prints, writes nothing
"""

import datetime
import os

from run import (HTTPS_PORT, JSON_BODY, Upstream, machine, per_request, replace_section,
                 spread, start, upstream_url)
# bench/run.py has put tests/netsim on the path.
from wan import SERVER_ADDRESS, Wan, measure_rtt_ms  # noqa: E402
from loopback import cpu_seconds, nginx_pids  # noqa: E402

RTT_MS = 25
KEEPALIVE_PORT = 8444
TLS12_PORT = 8445
# nginx closes a connection idle for 2 s and says so (`Keep-Alive: timeout=2`).
KEEPALIVE_TIMEOUT_S = 2
# The callers' idle gaps, cycled through: around the server's timeout, each a little
# different, as callers' are.
GAPS_MS = list(range(1900, 2101, 10))
POST_BODY = '{"event": "update"}'

# The upstream's servers beside bench/run.py's: TLS 1.3 with the short keep-alive timeout,
# and TLS 1.2 (same certificate, session tickets on as by default).
SERVERS = """
  server {{
    listen {address}:{keepalive_port} ssl;
    ssl_certificate {pki}/server.pem;
    ssl_certificate_key {pki}/server.key;
    ssl_protocols TLSv1.3;
    keepalive_timeout {timeout}s {timeout}s;
    location = /post {{ default_type application/json; return 200 '{json}'; }}
  }}
  server {{
    listen {address}:{tls12_port} ssl;
    ssl_certificate {pki}/server.pem;
    ssl_certificate_key {pki}/server.key;
    ssl_protocols TLSv1.2;
    location = /json {{ default_type application/json; return 200 '{json}'; }}
  }}
"""

# (key, description, egressd's transport settings; None: the Go client)
KEEPALIVE_CLIENTS = [
    ("honoured", "egressd, hints honoured (default, margin 1 s)", ""),
    ("ignored", "egressd, hints ignored", "honor_keepalive_hints { value: false }"),
    ("Go", "Go 1.19 net/http direct", None),
]
TLS_PROTOCOLS = [("TLS 1.2", TLS12_PORT), ("TLS 1.3", HTTPS_PORT)]
# (handshake, egressd's transport settings): every fetch on a new connection.
HANDSHAKES = [("full", "max_requests_per_connection: 1 "
                       "tls_session_resumption { value: false }"),
              ("resumed", "max_requests_per_connection: 1")]


def main():
    args, work, tools = start("egress-lifecycle-")
    plan = Plan(args.smoke)
    configs = {key: tools.config(f"keepalive-{key}", transport=transport)
               for key, _, transport in KEEPALIVE_CLIENTS if transport is not None}
    configs.update({handshake: tools.config(f"tls-{handshake}", transport=transport)
                    for handshake, transport in HANDSHAKES})
    post_flags = [f"--url={upstream_url('/post', KEEPALIVE_PORT)}", "--method=POST",
                  f"--body={POST_BODY}", "--read_body", f"--requests={plan.posts}",
                  f"--gap_ms={','.join(str(gap) for gap in GAPS_MS)}"]

    started = datetime.datetime.now()
    keepalive, tls = {}, {}
    with Wan(tools.delay_link, rtt_ms=RTT_MS) as wan:
        measured_rtt = measure_rtt_ms(wan)
        upstream = Upstream(wan, work, SERVERS.format(
            address=SERVER_ADDRESS, keepalive_port=KEEPALIVE_PORT, tls12_port=TLS12_PORT,
            pki=os.path.join(work, "pki"), timeout=KEEPALIVE_TIMEOUT_S, json=JSON_BODY))
        for repetition in range(plan.repetitions):
            for key, _, _ in KEEPALIVE_CLIENTS:
                keepalive.setdefault(key, []).append(upstream.measure(
                    lambda: posts(tools, wan, configs.get(key), post_flags), "/post"))
            for protocol, port in TLS_PROTOCOLS:
                for handshake, _ in HANDSHAKES:
                    flags = [f"--url={upstream_url('/json', port)}",
                             f"--requests={plan.connections}"]
                    nginx = nginx_pids(upstream.process.pid)
                    nginx_cpu = cpu_seconds(nginx)
                    run = upstream.measure(lambda: tools.fetches_through_egressd(
                        wan, configs[handshake], flags), "/json")
                    run["nginx_cpu_s"] = cpu_seconds(nginx) - nginx_cpu
                    tls.setdefault((protocol, handshake), []).append(run)
            print(f"repetition {repetition + 1}: done", flush=True)
    minutes = (datetime.datetime.now() - started).total_seconds() / 60

    section = report(plan, measured_rtt, minutes, keepalive, tls)
    if args.smoke:
        print(section)
        return
    replace_section(args.results, section, BEGIN, END)
    print(f"wrote {args.results}")


def posts(tools, wan, config, flags):
    """The POSTs, through an egressd started with config, or by the Go client if None."""
    if config is None:
        return tools.go_fetches(wan, flags, allow_failed=True)
    return tools.fetches_through_egressd(wan, config, flags, allow_failed=True)


class Plan:
    """How much to measure: the full run, or a smoke."""

    def __init__(self, smoke):
        self.repetitions = 1 if smoke else 3
        self.posts = 4 if smoke else len(GAPS_MS) + 1
        self.connections = 5 if smoke else 200


def report(plan, measured_rtt, minutes, keepalive, tls):
    lines = [
        BEGIN,
        "## Connection lifecycle over the simulated WAN (issue 16)",
        "",
        "Command: `tools/bench.sh --lifecycle` (`bench/lifecycle.py`; rewrites this section).",
        f"Machine: {machine()}; {datetime.date.today().isoformat()}; the run took"
        f" {minutes:.0f} minutes.",
        f"Each figure: median of {plan.repetitions} runs, (min–max) when they differ.",
        "",
        f"The link of bench/run.py (`tests/netsim/wan.py`) at RTT {RTT_MS} ms (measured:"
        f" {measured_rtt:.2f} ms); nginx in the",
        "server namespace; egressd (a fresh one per run, empty pool) and the callers in the",
        "client namespace. New connections and resumed TLS sessions are counted by nginx",
        "(`$connection_requests`, `$ssl_session_reused`).",
        "",
        "### POSTs across the server's keep-alive timeout",
        "",
        f"nginx with `keepalive_timeout {KEEPALIVE_TIMEOUT_S}s {KEEPALIVE_TIMEOUT_S}s`"
        f" (closes a connection idle for {KEEPALIVE_TIMEOUT_S} s and sends",
        f"`Keep-Alive: timeout={KEEPALIVE_TIMEOUT_S}`), HTTPS with TLS 1.3. One caller sends"
        f" {plan.posts} sequential POSTs",
        f"(body `{POST_BODY}`) and reads each response to its end (egressd:",
        "`BODY_MODE_FULL`; Go: `io.Copy` before `Close`, or Go 1.19 would close the",
        "connection); after each response it waits a gap cycling",
        f"through {GAPS_MS[0]:,}, {GAPS_MS[1]:,}, ... {GAPS_MS[-1]:,} ms. A POST whose"
        " request was written is retried",
        "neither by egressd nor by Go. Columns: egressd honouring the hints (default:",
        "an idle connection is not reused later than 1 s before the announced timeout),",
        "egressd with `transport { honor_keepalive_hints { value: false } }`, and Go's",
        "client calling nginx directly. Failed: fetches that returned an error",
        "(egressd: a gRPC error). ms per request: time in the calls, failed ones included,",
        "gaps not counted.",
        "",
        "| | " + " | ".join(label for _, label, _ in KEEPALIVE_CLIENTS) + " |",
        "|---|" + "---|" * len(KEEPALIVE_CLIENTS),
    ]
    for figure, values, digits in (
            ("fetches", lambda runs: [r["requests"] for r in runs], 0),
            ("failed", lambda runs: [r["failed"] for r in runs], 0),
            ("new connections", lambda runs: [r["new_connections"] for r in runs], 0),
            ("ms per request", per_request, 1)):
        lines.append(f"| {figure} | " + " | ".join(
            spread(values(keepalive[key]), digits) for key, _, _ in KEEPALIVE_CLIENTS) + " |")
    lines += [
        "",
        f"### TLS: resumed against full handshakes at RTT {RTT_MS} ms",
        "",
        f"{plan.connections} sequential `Fetch` calls of `/json` through egressd with"
        " `transport { max_requests_per_connection: 1 }`,",
        "so every fetch dials a new connection; \"full\" adds `tls_session_resumption {"
        " value: false }`,",
        "\"resumed\" keeps the default. nginx offers TLS 1.2 only or TLS 1.3 only (P-256",
        "ECDSA certificate, session tickets on). ms per new connection: the whole fetch",
        "(TCP, TLS, request and response) as the caller sees it. CPU: egressd's and nginx's",
        "(master and worker) utime + stime from `/proc/PID/stat` over the fetches (10 ms",
        f"ticks: about ±{10000 / plan.connections:.0f} us per connection), gRPC included"
        " for egressd.",
        "",
        "| protocol | handshake | new connections | resumed | ms per new connection |"
        " egressd CPU us per connection | nginx CPU us per connection |",
        "|---|---|---|---|---|---|---|",
    ]
    for protocol, _ in TLS_PROTOCOLS:
        for handshake, _ in HANDSHAKES:
            runs = tls[(protocol, handshake)]
            lines.append(
                f"| {protocol} | {handshake} | {spread([r['new_connections'] for r in runs])}"
                f" | {spread([r['resumed'] for r in runs])} | {spread(per_request(runs), 1)}"
                f" | {spread([cpu_us(r, 'egressd_cpu_s') for r in runs])}"
                f" | {spread([cpu_us(r, 'nginx_cpu_s') for r in runs])} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def cpu_us(run, key):
    """CPU microseconds per fetch."""
    return run[key] / run["requests"] * 1e6


BEGIN = "<!-- bench/lifecycle.py: begin (generated; edit the script, not this) -->"
END = "<!-- bench/lifecycle.py: end -->"


if __name__ == "__main__":
    main()
