#!/usr/bin/python3
"""The isolation benchmark (issue 18), in one run on the loopback of a namespace made for
it: a quiet caller's latency through egressd alone, and while a noisy caller sends ten
times its quota (Config.quotas) at the same egressd and upstream. The noisy caller must
get RESOURCE_EXHAUSTED for its excess only, and the quiet caller's p99 must move by at
most 20 %. Rewrites its section of bench/RESULTS.md; bench/run.py provides the tools.

    tools/bench.sh --isolation            # about 2 minutes; rewrites bench/RESULTS.md
    tools/bench.sh --isolation --smoke    # a few seconds per row; prints, writes nothing
"""

import datetime
import os
import statistics
import subprocess
import threading

from run import machine, replace_section, spread, start
# bench/run.py has put tests/netsim on the path.
from wan import Wan, readable_tempdir  # noqa: E402
from loopback import (UPSTREAM_HTTP, UPSTREAM_PORT, UPSTREAM_TLS_PORT, grpc_frame,  # noqa: E402
                      metric_sum, percentile, read_latencies_ms)
from nginx import start_nginx  # noqa: E402

EGRESSD_GRPC = "127.0.0.1:50151"
EGRESSD_METRICS = "127.0.0.1:9564"
FETCH_PATH = "/egress.v1.Egress/Fetch"
QUOTA_RPS = 200  # the noisy caller's quota, requests per second (burst as many)
QUIET_RPS = 200  # what the quiet caller sends
NOISY_RPS = 10 * QUOTA_RPS
CLIENTS = 4      # h2load connections per caller; each sends its share of the rate

CONFIG = f"""
policy {{
  allow_cidrs: "127.0.0.0/8"
  caller_header: "x-egress-caller"
  caller_header_trusted_peers: "127.0.0.1"
}}
quotas {{ name: "noisy" caller: "noisy" hosts: "*" requests_per_second: {QUOTA_RPS} }}
"""

BEGIN = "<!-- bench/isolation.py: begin (generated; edit the script, not this) -->"
END = "<!-- bench/isolation.py: end -->"


class Plan:
    def __init__(self, smoke):
        self.seconds = 3 if smoke else 20
        self.repetitions = 1 if smoke else 3


def main():
    args, work, tools = start("egress-isolation-")
    plan = Plan(args.smoke)
    started = datetime.datetime.now()
    rows = {"alone": [], "beside": []}
    noisy_runs = []
    with Wan(tools.delay_link, rtt_ms=0) as wan:
        ns = wan.CLIENT
        directory = readable_tempdir("isolation-", work)
        www = os.path.join(directory, "www")
        os.makedirs(www)
        with open(os.path.join(www, "1k"), "wb") as out:
            out.write(b"x" * 1024)
        template = UPSTREAM_HTTP
        for key, value in {"www": www, "port": UPSTREAM_PORT, "tls_port": UPSTREAM_TLS_PORT,
                           "pki": os.path.dirname(tools.ca)}.items():
            template = template.replace("{" + key + "}", str(value))
        prefix = os.path.join(directory, "upstream")
        os.makedirs(prefix)
        start_nginx(wan, ns, prefix, template, "127.0.0.1", UPSTREAM_PORT, "1")
        config = os.path.join(directory, "egressd.textproto")
        with open(config, "w") as out:
            out.write(CONFIG)
        wan.spawn(ns, [tools.egressd, f"--config={config}", f"--grpc_listen={EGRESSD_GRPC}",
                       f"--metrics_listen={EGRESSD_METRICS}", "--admin_listen=127.0.0.1:0",
                       "--access_log=off"], stderr=subprocess.DEVNULL)
        host, port = EGRESSD_GRPC.split(":")
        wan.wait_for_port(ns, host, int(port))
        frame = grpc_frame(directory, f"http://127.0.0.1:{UPSTREAM_PORT}/1k", "fetch-1k")

        def h2load(caller, rps, log):
            if os.path.exists(log):
                os.remove(log)  # h2load appends
            wan.run(ns, ["h2load", f"--duration={plan.seconds}", f"-c{CLIENTS}", "-m1",
                         f"--rps={rps // CLIENTS}", f"--log-file={log}", "-d", frame,
                         "-H", "content-type: application/grpc", "-H", "te: trailers",
                         "-H", f"x-egress-caller: {caller}",
                         f"http://{EGRESSD_GRPC}{FETCH_PATH}"],
                    stdout=subprocess.DEVNULL, check=True)
            return read_latencies_ms(log)

        def counter(name, caller):
            return metric_sum(wan, ns, EGRESSD_METRICS, name, f'caller="{caller}"')

        def fetches_ok():
            return metric_sum(wan, ns, EGRESSD_METRICS, "egress_fetches_total", 'code="OK"')

        for repetition in range(plan.repetitions):
            quiet_log = os.path.join(directory, "quiet.log")
            rows["alone"].append(latency(h2load("quiet", QUIET_RPS, quiet_log)))
            before = {key: counter(*series) for key, series in COUNTERS.items()}
            ok_before = fetches_ok()
            noisy_error = []

            def noisy():
                try:
                    h2load("noisy", NOISY_RPS, os.path.join(directory, "noisy.log"))
                except Exception as error:  # noqa: BLE001 - reported below
                    noisy_error.append(error)
            thread = threading.Thread(target=noisy)
            thread.start()
            rows["beside"].append(latency(h2load("quiet", QUIET_RPS, quiet_log)))
            thread.join()
            if noisy_error:
                raise noisy_error[0]
            after = {key: counter(*series) for key, series in COUNTERS.items()}
            run = {key: after[key] - before[key] for key in COUNTERS}
            check(plan, run, rows["beside"][-1]["requests"], fetches_ok() - ok_before)
            noisy_runs.append(run)
            print(f"repetition {repetition + 1}: done", flush=True)
    minutes = (datetime.datetime.now() - started).total_seconds() / 60
    section = report(plan, rows, noisy_runs, minutes)
    if args.smoke:
        print(section)
        return
    replace_section(args.results, section, BEGIN, END)
    print(f"wrote {args.results}")


# What egressd counted of each caller during a run beside the other: (metric, caller).
COUNTERS = {"noisy_fetches": ("egress_caller_fetches_total", "noisy"),
            "noisy_refused": ("egress_quota_rejected_total", "noisy"),
            "quiet_refused": ("egress_quota_rejected_total", "quiet")}


def check(plan, run, quiet_requests, ok):
    """What must hold whatever the timing: the noisy caller gets no more than its quota
    allows, every other call of both callers is OK (h2load counts any gRPC answer as a
    success), and the quiet caller is never refused. Fails the run otherwise."""
    admitted = run["noisy_fetches"] - run["noisy_refused"]
    bound = QUOTA_RPS * plan.seconds + QUOTA_RPS
    if admitted > bound:
        raise RuntimeError(f"the noisy caller got {admitted:.0f} fetches, over {bound}")
    # Calls still under way when h2load's time is up are cancelled: one per connection.
    shortfall = quiet_requests + admitted - ok
    if run["quiet_refused"] or not 0 <= shortfall <= 2 * CLIENTS:
        raise RuntimeError(f"{ok:.0f} OK fetches, not {quiet_requests} quiet and {admitted:.0f} "
                           f"noisy; the quiet caller was refused {run['quiet_refused']:.0f}")


def latency(latencies):
    if not latencies:
        raise RuntimeError("h2load logged no request")
    return {"requests": len(latencies), "p50": percentile(latencies, 50),
            "p99": percentile(latencies, 99)}


def report(plan, rows, noisy_runs, minutes):
    median = statistics.median
    alone_p99 = median(r["p99"] for r in rows["alone"])
    beside_p99 = median(r["p99"] for r in rows["beside"])
    lines = [
        BEGIN,
        "## Isolation: a caller at 10x its quota beside another caller",
        "",
        f"`tools/bench.sh --isolation`, {datetime.date.today()}, {machine()}; "
        f"{plan.repetitions} repetition(s) of {plan.seconds} s per row, {minutes:.1f} min. "
        f"One egressd and one nginx (1 KiB) on the loopback of a namespace; h2load with "
        f"{CLIENTS} connections per caller at a fixed rate (`--rps`). The quiet caller sends "
        f"{QUIET_RPS} requests/s, alone and then while the noisy caller sends {NOISY_RPS}/s "
        f"against a quota of {QUOTA_RPS}/s (`quotas {{ caller: \"noisy\" "
        f"requests_per_second: {QUOTA_RPS} }}`). Figures: medians (spread).",
        "",
        "| quiet caller | requests | p50 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    for key, label in (("alone", "alone"), ("beside", f"beside the noisy caller at {NOISY_RPS}/s")):
        runs = rows[key]
        lines.append(f"| {label} | {spread([r['requests'] for r in runs])} | "
                     f"{spread([r['p50'] for r in runs], 2)} | {spread([r['p99'] for r in runs], 2)} |")
    lines += [
        "",
        f"Quiet caller's p99 beside the noisy one / alone: **{beside_p99 / alone_p99:.2f}** "
        f"(must be at most 1.20).",
        "",
        "| noisy caller, per run | fetches | refused (QUOTA_EXCEEDED) | admitted | "
        "admitted per second | quota's bound (rate x duration + burst) |",
        "|---|---|---|---|---|---|",
    ]
    for run in noisy_runs:
        total, refused = run["noisy_fetches"], run["noisy_refused"]
        admitted = total - refused
        lines.append(f"| | {total:.0f} | {refused:.0f} | {admitted:.0f} | "
                     f"{admitted / plan.seconds:.0f} | {QUOTA_RPS * plan.seconds + QUOTA_RPS} |")
    quiet_refused = sum(run["quiet_refused"] for run in noisy_runs)
    lines += ["", f"Quiet caller's requests refused: {quiet_refused:.0f}.", END]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
