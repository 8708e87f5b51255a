#!/usr/bin/python3
"""The benchmark (issues 6 and 7): egressd's drain modes over a simulated WAN, side by side with a
Go client, all in one run. Rewrites its section of bench/RESULTS.md and the plot beside it.

    tools/bench.sh            # the full run, about 20 minutes; rewrites bench/RESULTS.md
    tools/bench.sh --smoke    # a few requests per scenario (CI); prints, writes nothing

Not a test: no thresholds. It fails only if a fetch fails or a tool is missing.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "netsim"))
from wan import (SERVER_ADDRESS, Wan, measure_rtt_ms, measure_throughput,  # noqa: E402
                 readable_tempdir, stop)
from loopback import (ACCESS_LOG_SHAPE, ACCESS_LOG_SYSTEMS, CEILING_GRPC,  # noqa: E402
                      LARGE_BYTES, LARGE_SHAPE, LARGE_SYSTEMS, SHAPES, SYSTEMS, Loopback,
                      cpu_seconds, rss_mib)
from nginx import start_nginx  # noqa: E402

HTTPS_PORT = 8443
EGRESSD_GRPC = "127.0.0.1:50051"
JSON_BODY = '{"success": true, "message": "update processed"}\\n'

# The connection table: (row name, path, gap between requests in ms).
TABLE_ROWS = [
    ("Content-Length 1 KiB", "/cl/1024", 0),
    ("Content-Length 262144", "/cl/262144", 0),
    ("Content-Length 262145", "/cl/262145", 0),
    ("chunked 1 KiB", "/chunked/1k", 0),
    ("chunked 300 KiB", "/chunked/300k", 0),
    ("body stalled 80 ms", "/stall", 0),
    ("second half 10 ms late, gap 0", "/late-half", 0),
    ("second half 10 ms late, gap 30 ms", "/late-half", 30),
]
MODES = ["OFF", "FIXED", "ADAPTIVE"]


def main():
    args, work, tools = start("egress-bench-")
    plan = Plan(args.smoke)

    with Wan(tools.delay_link, rtt_ms=0) as wan:
        link_mb_s = measure_throughput(wan, seconds=plan.throughput_seconds)
        print(f"link at 0 ms: {link_mb_s:.0f} MB/s", flush=True)
        # The loopback parts use the client namespace alone.
        loopback = Loopback(wan, wan.CLIENT, tools, work)
        memory = {"idle": rss_mib(loopback.egressd.pid)}
        for kind, tls in (("plain", False), ("tls", True)):
            idle = loopback.pool_of_idle_connections(plan.idle_connections, tls)
            burst = rss_mib(loopback.egressd.pid)
            time.sleep(plan.memory_release_wait_s)
            memory[kind] = (idle, burst, rss_mib(loopback.egressd.pid))
        overhead = {}
        for repetition in range(plan.repetitions):
            runs = [(shape, system) for shape in SHAPES for system, _ in SYSTEMS]
            runs += [(LARGE_SHAPE, system) for system, _ in LARGE_SYSTEMS]
            runs += [(ACCESS_LOG_SHAPE, system) for system, _ in ACCESS_LOG_SYSTEMS]
            for (label, connections, streams), system in runs:
                overhead.setdefault((label, system), []).append(loopback.h2load(
                    system, connections, streams, plan.h2load_seconds))
            print(f"loopback, repetition {repetition + 1}: done", flush=True)
        memory["load"] = max(run["egressd_rss_max"] for run in overhead[("64 connections",
                                                                          "egressd")])
    if args.loopback:
        report = Report(plan, link_mb_s, {}, {}, {}, {}, overhead, memory)
        print("\n".join(report.overhead_markdown() + report.memory_markdown()))
        return

    headline, table, measured_rtt, grpc_floor = {}, {}, {}, {}
    for rtt in plan.rtts:
        with Wan(tools.delay_link, rtt_ms=rtt) as wan:
            measured_rtt[rtt] = measure_rtt_ms(wan)
            upstream = Upstream(wan, work)
            for repetition in range(plan.repetitions):
                for mode in MODES:
                    run = upstream.measure(lambda: tools.egressd_fetches(
                        wan, mode, "/json", plan.headline_requests, 0), "/json")
                    headline.setdefault((rtt, mode), []).append(run)
                run = upstream.measure(lambda: tools.go_fetches(
                    wan, [f"-url={upstream_url('/json')}",
                          f"-requests={plan.headline_requests}"]), "/json")
                headline.setdefault((rtt, "Go"), []).append(run)
                grpc_floor.setdefault(rtt, []).append(tools.grpc_floor(
                    wan, plan.headline_requests, gap_ms=rtt))
                for name, path, gap in TABLE_ROWS:
                    for mode in MODES:
                        run = upstream.measure(lambda: tools.egressd_fetches(
                            wan, mode, path, plan.table_requests, gap), path)
                        table.setdefault((rtt, name, mode), []).append(run)
                print(f"rtt {rtt} ms, repetition {repetition + 1}: done", flush=True)

    report = Report(plan, link_mb_s, measured_rtt, grpc_floor, headline, table, overhead,
                    memory)
    if args.smoke:
        print(report.markdown(plot=None))
        return
    plot = os.path.join(os.path.dirname(args.results), "wan_rtt.png")
    report.plot(plot, work)
    replace_section(args.results, report.markdown(plot=os.path.basename(plot)))
    print(f"wrote {args.results} and {plot}")


def start(work_prefix):
    """Reads the command line of this script (and of bench/lifecycle.py); returns it, a
    new work directory and the Tools."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="bazel-bin", help="Bazel's output tree")
    parser.add_argument("--go_client", required=True, help="the built bench/go_client")
    parser.add_argument("--results", default="bench/RESULTS.md")
    parser.add_argument("--smoke", action="store_true", help="a few requests per scenario")
    parser.add_argument("--loopback", action="store_true",
                        help="the loopback part only, printed (RESULTS.md is not rewritten)")
    args = parser.parse_args()
    work = readable_tempdir(work_prefix)
    print(f"work directory {work}", flush=True)
    return args, work, Tools(args.bin, args.go_client, work)


class Plan:
    """How much to measure: the full run, or the CI smoke."""

    def __init__(self, smoke):
        self.rtts = [25] if smoke else [5, 25, 50]
        self.repetitions = 1 if smoke else 3
        self.headline_requests = 3 if smoke else 100
        self.table_requests = 3 if smoke else 10
        self.throughput_seconds = 1 if smoke else 5
        self.h2load_seconds = 1 if smoke else 5
        self.idle_connections = 100 if smoke else 1000
        # Long enough for egressd's memory releaser (every 10 s) to look after a burst.
        self.memory_release_wait_s = 1 if smoke else 11


class Tools:
    """The programs under measurement, and how each is run in the client namespace."""

    def __init__(self, bazel_bin, go_client, work):
        self.delay_link = os.path.join(bazel_bin, "tests/netsim/delay_link")
        self.egressd = os.path.join(bazel_bin, "service/egressd")
        self.sequential_fetches = os.path.join(bazel_bin, "bench/sequential_fetches")
        self.grpc_ceiling = os.path.join(bazel_bin, "bench/grpc_ceiling")
        self.go_client = go_client
        self.ca = make_pki(work)
        self.work = work
        # drain mode -> egressd's config file
        self.configs = {mode: self.config(f"drain-{mode}", f"drain {{ mode: DRAIN_MODE_{mode} }}")
                        for mode in MODES}

    def config(self, name, settings="", transport=""):
        """Writes an egressd config file trusting the test CA and allowing the upstream,
        with settings (top-level fields) and transport (fields of `transport`) added;
        returns its path."""
        path = os.path.join(self.work, f"egressd-{name}.textproto")
        with open(path, "w") as out:
            out.write(f'{settings}\n'
                      f'transport {{ extra_ca_file: "{self.ca}" {transport} }}\n'
                      f'policy {{ allow_cidrs: "{SERVER_ADDRESS}/32" }}\n')
        return path

    def egressd_fetches(self, wan, mode, path, requests, gap_ms):
        return self.fetches_through_egressd(wan, self.configs[mode], [
            f"--url={upstream_url(path)}", f"--requests={requests}", f"--gap_ms={gap_ms}"])

    def fetches_through_egressd(self, wan, config, flags, allow_failed=False):
        """Runs sequential_fetches with flags through a fresh egressd started with config;
        returns its JSON, with egressd's CPU seconds during the fetches as egressd_cpu_s."""
        egressd = wan.spawn(wan.CLIENT, [self.egressd, f"--config={config}",
                                         f"--grpc_listen={EGRESSD_GRPC}",
                                         f"--access_log={os.path.join(self.work, 'access.log')}"],
                            stderr=subprocess.DEVNULL)
        try:
            host, port = EGRESSD_GRPC.split(":")
            wan.wait_for_port(wan.CLIENT, host, int(port))
            cpu = cpu_seconds([egressd.pid])
            result = run_json(wan, [self.sequential_fetches, f"--target={EGRESSD_GRPC}",
                                    *flags], allow_failed)
            result["egressd_cpu_s"] = cpu_seconds([egressd.pid]) - cpu
            return result
        finally:
            stop(egressd)

    def grpc_floor(self, wan, requests, gap_ms):
        """Sequential calls to a gRPC server that answers at once, each after `gap_ms` of
        idleness, as egressd's caller and server are idle while the upstream answers."""
        ceiling = wan.spawn(wan.CLIENT, [self.grpc_ceiling, f"--listen={CEILING_GRPC}"])
        try:
            host, port = CEILING_GRPC.split(":")
            wan.wait_for_port(wan.CLIENT, host, int(port))
            return run_json(wan, [self.sequential_fetches, f"--target={CEILING_GRPC}",
                                  f"--url={upstream_url('/json')}", f"--requests={requests}",
                                  f"--gap_ms={gap_ms}"])
        finally:
            stop(ceiling)

    def go_fetches(self, wan, flags, allow_failed=False):
        return run_json(wan, [self.go_client, f"-ca={self.ca}", *flags], allow_failed)


def run_json(wan, argv, allow_failed=False):
    """Runs argv (sequential_fetches or the Go client) in the client namespace; returns
    its JSON line. Fails if a fetch failed, unless allow_failed."""
    completed = wan.run(wan.CLIENT, argv, stdout=subprocess.PIPE, text=True)
    failed_fetches = allow_failed and completed.returncode == 1 and completed.stdout
    if completed.returncode != 0 and not failed_fetches:
        raise RuntimeError(f"{argv[0]} failed: {completed.stdout}")
    return json.loads(completed.stdout)


def upstream_url(path, port=HTTPS_PORT):
    return f"https://{SERVER_ADDRESS}:{port}{path}"


def make_pki(work):
    """A test CA and a certificate for the upstream's address; returns the CA file."""
    pki = os.path.join(work, "pki")
    os.makedirs(pki)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    quiet = {"check": True, "stderr": subprocess.DEVNULL, "cwd": pki}
    subprocess.run(["openssl", "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem",
                    "-days", "2", "-subj", "/CN=egress bench CA"], **quiet)
    subprocess.run(["openssl", "req", *key, "-keyout", "server.key", "-out", "server.csr",
                    "-subj", "/CN=upstream"], **quiet)
    with open(os.path.join(pki, "san.ext"), "w") as out:
        out.write(f"subjectAltName=IP:{SERVER_ADDRESS},IP:127.0.0.1\n")  # 127.0.0.1: loopback
    subprocess.run(["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem",
                    "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2",
                    "-extfile", "san.ext"], **quiet)
    return os.path.join(pki, "ca.pem")


class Upstream:
    """nginx in the server namespace, HTTPS with TLS 1.3 only, serving the scenarios, and
    the server blocks `servers` adds. Its access log tells which requests came on a new
    connection and which resumed a TLS session."""

    def __init__(self, wan, work, servers="", http2_port=None):
        self.dir = readable_tempdir("nginx-", work)
        www = os.path.join(self.dir, "www", "cl")
        os.makedirs(www)
        for size in (1024, 262144, 262145):
            with open(os.path.join(www, str(size)), "wb") as out:
                out.write(b"x" * size)
        self.log = os.path.join(self.dir, "access.log")
        values = {"dir": self.dir, "pki": os.path.join(work, "pki"), "address": SERVER_ADDRESS,
                  "json": JSON_BODY}
        http = UPSTREAM_HTTP.format(**values) + UPSTREAM_SERVER.format(
            **values, port=HTTPS_PORT, options="ssl")
        if http2_port:  # the same server again, speaking HTTP/2 to those that ask (ALPN)
            http += UPSTREAM_SERVER.format(**values, port=http2_port, options="ssl http2")
        self.process = start_nginx(wan, wan.SERVER, self.dir, http + servers, SERVER_ADDRESS,
                                   HTTPS_PORT)

    def measure(self, fetches, path):
        """Runs fetches(); returns its JSON with the new connections and the resumed TLS
        sessions nginx saw added (a request that failed may never have reached it)."""
        before = self._entries()
        result = fetches()
        entries = self._wait_for(path, before, result["requests"] - result["failed"])
        result["new_connections"] = sum(1 for e in entries if e[1] == "1")
        result["resumed"] = sum(1 for e in entries if e[3] == "r")
        return result

    def _entries(self):
        with open(self.log) as log:
            return [line.split() for line in log]

    def _wait_for(self, path, before, expected):
        # nginx logs a request when it is done with it: a body cut short is logged once
        # nginx sees the close, which may be a round trip after the caller has moved on.
        for _ in range(200):
            entries = [e for e in self._entries()[len(before):] if e[2] == path]
            if len(entries) >= expected:
                return entries
            time.sleep(0.05)
        raise RuntimeError(f"nginx logged {len(entries)} of {expected} requests for {path}")


# Inside nginx's http block; the rest is bench/nginx.py's.
UPSTREAM_HTTP = """
  log_format counted '$connection $connection_requests $uri $ssl_session_reused';
  access_log {dir}/access.log counted;
  keepalive_timeout 300s;
"""
UPSTREAM_SERVER = """
  server {{
    listen {address}:{port} {options};
    ssl_certificate {pki}/server.pem;
    ssl_certificate_key {pki}/server.key;
    ssl_protocols TLSv1.3;
    root {dir}/www;
    location = /json {{ default_type application/json; return 200 '{json}'; }}
    location /cl/ {{ }}
    location = /chunked/1k {{ echo_duplicate 1024 "c"; }}
    location = /chunked/300k {{ echo_duplicate 307200 "c"; }}
    location = /stall {{
      echo_duplicate 1024 "a"; echo_flush; echo_sleep 0.08; echo_duplicate 1024 "b";
    }}
    location = /late-half {{
      echo_duplicate 1024 "a"; echo_flush; echo_sleep 0.01; echo_duplicate 1024 "b";
    }}
  }}
"""


def spread(values, digits=0):
    """'median (min-max)' of values."""
    fmt = f"{{:,.{digits}f}}"
    median = fmt.format(statistics.median(values))
    if min(values) == max(values):
        return median
    return f"{median} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def per_request(runs):
    return [run["fetch_ms"] / run["requests"] for run in runs]


def machine():
    with open("/proc/cpuinfo") as cpuinfo:
        model = next(line.split(":", 1)[1].strip() for line in cpuinfo
                     if line.startswith("model name"))
    return f"{os.cpu_count()} cores, {model}"


CLIENTS = [("OFF", "egressd, drain OFF (Go 1.26 behaviour)"),
           ("FIXED", "egressd, drain FIXED (Go 1.27: 256 KiB / 50 ms)"),
           ("ADAPTIVE", "egressd, drain ADAPTIVE (by cost, drain-aware acquisition)"),
           ("Go", "Go 1.19 net/http direct, `resp.Body.Close()` only")]


class Report:
    def __init__(self, plan, link_mb_s, measured_rtt, grpc_floor, headline, table, overhead,
                 memory):
        self.plan = plan
        self.link_mb_s = link_mb_s
        self.measured_rtt = measured_rtt
        self.grpc_floor = grpc_floor
        self.headline = headline
        self.table = table
        self.overhead = overhead
        self.memory = memory

    def physical_limit_ms(self, rtt):
        # One round trip per request, plus one connection set-up: TCP, then TLS 1.3; at
        # the round trip the link was measured to give, which is what any client gets.
        return (self.plan.headline_requests + 2) * self.measured_rtt[rtt]

    def markdown(self, plot):
        plan = self.plan
        lines = [
            BEGIN,
            "## Drain modes over a simulated WAN (issues 6 and 7)",
            "",
            "Command: `tools/bench.sh` (rewrites this section and `wan_rtt.png`).",
            f"Machine: {machine()}; {datetime.date.today().isoformat()}.",
            f"Each figure: median of {plan.repetitions} runs, (min–max) when they differ.",
            "",
            "The link: two network namespaces joined by `tests/netsim/delay_link` (a TUN",
            "device in each, packets forwarded after a fixed one-way delay of RTT/2).",
            f"At 0 ms it carries {self.link_mb_s:,.0f} MB/s on one TCP stream, so bandwidth",
            "does not mask round trips. Its measured round trip (median of 100 one-byte",
            "TCP echoes) is "
            + ", ".join(f"{self.measured_rtt[rtt]:.2f} ms at {rtt} ms" for rtt in plan.rtts)
            + ": waking a sleeping thread costs a few",
            "hundred microseconds on this virtual machine. Upstream: nginx, HTTPS with",
            "TLS 1.3 only. egressd and the callers run in the client namespace; each run",
            "starts a fresh egressd (empty pool). New connections are counted by nginx",
            "(`$connection_requests`).",
            "",
            f"### The Go blog's headline: {plan.headline_requests} sequential fetches of a"
            " small JSON body",
            "",
            "`Fetch` with `BODY_MODE_NONE` of `{\"success\": true, \"message\": \"update "
            "processed\"}` and a newline; the Go client closes each body unread. The",
            "physical limit is one round trip per request plus one connection set-up",
            "(TCP, then TLS 1.3: two round trips), at the link's measured round trip.",
            "egressd's callers reach it over gRPC: the last row of each RTT adds what one",
            "gRPC call costs on this machine when caller and server have been idle for the",
            "round trip (`bench/grpc_ceiling`, a server that answers at once, called",
            f"{plan.headline_requests} times with the RTT as the gap, in the same run).",
            "",
            "| RTT | client | new connections | total ms | ms per request | × physical limit |",
            "|---|---|---|---|---|---|",
        ]
        for rtt in plan.rtts:
            limit = self.physical_limit_ms(rtt)
            for key, label in CLIENTS:
                runs = self.headline[(rtt, key)]
                totals = [run["fetch_ms"] for run in runs]
                lines.append(
                    f"| {rtt} ms | {label} | {spread([r['new_connections'] for r in runs])} | "
                    f"{spread(totals)} | {spread(per_request(runs), 2)} | "
                    f"{spread([t / limit for t in totals], 2)} |")
            lines.append(f"| {rtt} ms | physical limit | 1 | {limit:,.0f} | "
                         f"{limit / plan.headline_requests:.2f} | 1.00 |")
            floors = [run["fetch_ms"] for run in self.grpc_floor[rtt]]
            with_grpc = [limit + floor for floor in floors]
            lines.append(f"| {rtt} ms | physical limit + one gRPC call per request | 1 | "
                         f"{spread(with_grpc)} | "
                         f"{spread([t / plan.headline_requests for t in with_grpc], 2)} | "
                         f"{spread([t / limit for t in with_grpc], 2)} |")
        if plot:
            lines += ["", f"![time per request against RTT]({plot})"]
        lines += [
            "",
            f"### The connection table: {plan.table_requests} sequential fetches per row",
            "",
            "`Fetch` with `BODY_MODE_NONE` through egressd; the body is left to the drain.",
            "",
            "| RTT | body | "
            + " | ".join(f"{mode}: new connections | {mode}: ms per request" for mode in MODES)
            + " |",
            "|---|---|" + "---|---|" * len(MODES),
        ]
        for rtt in plan.rtts:
            for name, _, _ in TABLE_ROWS:
                cells = []
                for mode in MODES:
                    runs = self.table[(rtt, name, mode)]
                    cells += [spread([r["new_connections"] for r in runs]),
                              spread(per_request(runs), 1)]
                lines.append(f"| {rtt} ms | {name} | " + " | ".join(cells) + " |")
        lines += self.overhead_markdown() + self.memory_markdown()
        lines.append(END)
        return "\n".join(lines) + "\n"

    def overhead_markdown(self):
        lines = [
            "",
            "### Overhead and throughput on loopback",
            "",
            f"`h2load` for {self.plan.h2load_seconds} s per run: unary `Fetch` calls"
            " (`BODY_MODE_FULL`, 1 KiB from nginx over HTTP/1.1) through egressd, and in",
            "the same run the same 1 KiB from the upstream directly, through nginx set up",
            "as a reverse-proxy egress gateway, and from the gRPC ceiling",
            "(`bench/grpc_ceiling.cc`: the same proto and gRPC library, a fixed answer,",
            "no I/O). Server CPU counts every server process (egressd or the gateway, and",
            "the upstream nginx) from `/proc`. h2load shares the 2 cores with the servers,",
            "so CPU per request is the figure that carries. The HTTPS rows fetch the same",
            "1 KiB from the upstream over TLS 1.3, on pooled connections.",
            "",
            "| shape | system | requests/s | p50 ms | p99 ms | server CPU s per 10k requests |",
            "|---|---|---|---|---|---|",
        ]
        for label, _, _ in SHAPES:
            for system, description in SYSTEMS:
                runs = self.overhead[(label, system)]
                lines.append(
                    f"| {label} | {description} | {spread([r['rps'] for r in runs])} | "
                    f"{spread([r['p50'] for r in runs], 2)} | "
                    f"{spread([r['p99'] for r in runs], 2)} | "
                    f"{spread([r['cpu_per_10k'] for r in runs], 2)} |")
        lines += [
            "",
            "Ratios of medians (requests/s: higher is better for egressd; CPU per request:"
            " lower is):",
            "",
            "| shape | egressd / ceiling: requests/s | egressd / ceiling: CPU per request |"
            " egressd / nginx gateway: requests/s | egressd / nginx gateway: CPU per request |",
            "|---|---|---|---|---|",
        ]
        for ours, gateway, suffix in (("egressd", "gateway", ""),
                                      ("egressd-tls", "gateway-tls", ", HTTPS upstream")):
            for label, _, _ in SHAPES:
                cells = []
                for peer in ("ceiling", gateway):
                    for figure in ("rps", "cpu_per_10k"):
                        cells.append(f"{self.ratio(label, ours, peer, figure):.2f}")
                lines.append(f"| {label}{suffix} | " + " | ".join(cells) + " |")
        return lines + self.large_bodies_markdown() + self.access_log_markdown()

    def ratio(self, label, ours, theirs, figure):
        """The ratio of two systems' medians of figure at shape label."""
        return (statistics.median(r[figure] for r in self.overhead[(label, ours)]) /
                statistics.median(r[figure] for r in self.overhead[(label, theirs)]))

    def large_bodies_markdown(self):
        label = LARGE_SHAPE[0]
        mib = LARGE_BYTES / 1048576
        lines = [
            "",
            f"1 MiB bodies, {label}: `FetchStream` through egressd (the caller reads every",
            "chunk) against the gateway, with the same server CPU accounting.",
            "",
            "| system | MiB/s | p50 ms | server CPU ms per MiB |",
            "|---|---|---|---|",
        ]
        for system, description in LARGE_SYSTEMS:
            runs = self.overhead[(label, system)]
            lines.append(
                f"| {description} | {spread([r['rps'] * mib for r in runs])} | "
                f"{spread([r['p50'] for r in runs], 2)} | "
                f"{spread([r['cpu_per_10k'] / 10 / mib for r in runs], 2)} |")
        mb_s = self.ratio(label, "egressd-1m", "gateway-1m", "rps")
        cpu = self.ratio(label, "egressd-1m", "gateway-1m", "cpu_per_10k")
        lines += ["", f"egressd / gateway: MiB/s {mb_s:.2f}, CPU per MiB {cpu:.2f}."]
        return lines

    def access_log_markdown(self):
        label = ACCESS_LOG_SHAPE[0]
        lines = [
            "",
            f"The access log, {label}: three more egressd, started alike, one writing a JSON",
            "line per fetch to a file (as in every egressd row above), one with",
            "`--access_log=off`, one writing to a pipe that is never read (lines past its",
            "queue are dropped and counted); measured one after the other in each repetition.",
            "",
            "| system | requests/s | p50 ms | server CPU s per 10k requests |"
            " lines dropped per run |",
            "|---|---|---|---|---|",
        ]
        for system, description in ACCESS_LOG_SYSTEMS:
            runs = self.overhead[(label, system)]
            lines.append(
                f"| {description} | {spread([r['rps'] for r in runs])} | "
                f"{spread([r['p50'] for r in runs], 2)} | "
                f"{spread([r['cpu_per_10k'] for r in runs], 2)} | "
                f"{spread([r['log_dropped'] for r in runs])} |")
        on, blocked = (self.ratio(label, system, "egressd-log-off", "rps")
                       for system in ("egressd-log-on", "egressd-log-blocked"))
        lines += ["", f"Requests/s against the log off: on {on:.2f}, blocked {blocked:.2f}."]
        return lines

    def memory_markdown(self):
        plain_idle, plain_burst, plain_rss = self.memory["plain"]
        tls_idle, tls_burst, tls_rss = self.memory["tls"]
        tls_connections = tls_idle - plain_idle
        per_connection = (
            f"{(plain_rss - self.memory['idle']) * 1024 / plain_idle:.1f} KiB per plain "
            f"connection, {(tls_rss - plain_rss) * 1024 / tls_connections:.1f} KiB per "
            "TLS connection")
        return [
            "",
            "### Memory",
            "",
            "egressd's resident set (`VmRSS`), in the loopback run above: right after a burst of",
            "concurrent fetches that leaves as many connections idle in the pool, and "
            f"{self.plan.memory_release_wait_s} s later,",
            "once its memory releaser has looked (`--memory_release_interval`, 10 s).",
            "",
            "| egressd | RSS MiB after the burst | RSS MiB after the release |",
            "|---|---|---|",
            f"| idle, just started | {self.memory['idle']:.1f} | |",
            f"| + {plain_idle:,} idle pooled plain-HTTP connections (its gauge) | "
            f"{plain_burst:.1f} | {plain_rss:.1f} |",
            f"| + {tls_connections:,} idle pooled TLS connections | "
            f"{tls_burst:.1f} | {tls_rss:.1f} |",
            f"| under load, 64 connections (largest sample) | {self.memory['load']:.1f} | |",
            "",
            f"After the release: {per_connection}.",
        ]

    def plot(self, png, work):
        data = os.path.join(work, "wan_rtt.dat")
        with open(data, "w") as out:
            for rtt in self.plan.rtts:
                medians = [statistics.median(per_request(self.headline[(rtt, key)]))
                           for key, _ in CLIENTS]
                limit = self.physical_limit_ms(rtt) / self.plan.headline_requests
                out.write(f"{rtt} {limit} " + " ".join(f"{m:.3f}" for m in medians) + "\n")
        titles = ["physical limit"] + [label.replace("`", "") for _, label in CLIENTS]
        series = ", ".join(f"'{data}' using 1:{column + 2} with linespoints title '{title}'"
                           for column, title in enumerate(titles))
        script = (
            "set terminal pngcairo size 900,540 font 'sans,10'\n"
            f"set output '{png}'\n"
            f"set title '{self.plan.headline_requests} sequential HTTPS fetches, body unread'\n"
            "set xlabel 'round-trip time (ms)'\n"
            "set ylabel 'time per request (ms)'\n"
            "set key top left\n"
            "set grid\n"
            f"set xtics ({', '.join(str(r) for r in self.plan.rtts)})\n"
            "set yrange [0:*]\n"
            f"plot {series}\n")
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


BEGIN = "<!-- bench/run.py: begin (generated; edit the script, not this) -->"
END = "<!-- bench/run.py: end -->"


def replace_section(path, section, begin=BEGIN, end=END):
    """Puts section (from its begin line to its end line) in place of the previous one in
    path, or first if there was none."""
    with open(path) as results:
        text = results.read()
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end) + 1:]
    else:
        title, _, rest = text.partition("\n\n")
        text = f"{title}\n\n{section}\n{rest}"
    with open(path, "w") as results:
        results.write(text)


if __name__ == "__main__":
    main()
