#!/usr/bin/python3
"""Where a fetch's CPU goes (issue 15, part 1): egressd under h2load on loopback, with the
nginx gateway and the gRPC ceiling measured the same way in the same run.

    tools/profile.sh [--seconds=10] [--connections=64]

For each system: CPU per request (perf stat's task-clock over the serving processes,
upstream nginx included where it serves), context switches and CPU migrations per
request, and thread wake-ups per request (the sched:sched_wakeup tracepoint, counted
on the serving processes' threads as wakees). Then perf record (DWARF call graphs) on
egressd alone, folded into bench/profile_egressd.svg (bench/flamegraph.py) and a list of
the functions with the most samples. Last, the scheduler's tracepoints machine-wide for
3 s of egressd's load: wake-ups by waker and wakee thread, and switches away from each
thread by whether it was preempted or went to sleep (a hand-off between threads shows
as a wake-up; cores shared with h2load and nginx show as preemptions). Prints markdown;
writes the SVG (and with --folded, the folded stacks).
"""

import argparse
import collections
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "netsim"))
from wan import Wan, readable_tempdir  # noqa: E402
from loopback import Loopback, h2load_succeeded  # noqa: E402
from run import Tools  # noqa: E402
import flamegraph  # noqa: E402

EVENTS = ["task-clock", "context-switches", "cpu-migrations", "sched:sched_wakeup"]
SYSTEMS = ["egressd", "gateway", "ceiling"]


def perf_stat(pids, during):
    """perf stat's counts over pids while during() runs."""
    out = os.path.join(readable_tempdir("perf-stat-"), "stat.csv")
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-o", out, "-e", ",".join(EVENTS),
                             "-p", ",".join(map(str, pids))])
    try:
        result = during()
    finally:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    counts = {}
    with open(out) as lines:
        for line in lines:
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[2] in EVENTS:
                counts[fields[2]] = float(fields[0]) if fields[0][0].isdigit() else None
    return counts, result


def h2load_requests(loopback, system, connections, seconds):
    """Runs h2load against system; returns the requests that succeeded."""
    run = loopback.h2load(system, connections, 1, seconds)
    return round(run["rps"] * seconds), run


def scheduler_events(script):
    """From perf script of sched:sched_wakeup and sched:sched_switch: wake-ups counted by
    (waker's thread name, wakee's), and switches away from a thread by (its name, its
    state: R = preempted while runnable, S or D = went to sleep)."""
    wakeups, switches = collections.Counter(), collections.Counter()
    for line in script.splitlines():
        match = re.match(r"\s*(\S.*?)\s+\d+\s+(sched:\S+):\s+(.*)", line)
        if not match:
            continue
        comm, event, trace = match.groups()
        if event.startswith("sched:sched_wakeup"):
            wakee = re.search(r"comm=(.+?) pid=", trace)
            if wakee:
                wakeups[(comm, wakee.group(1))] += 1
        else:
            switch = re.search(r"prev_comm=(.+?) prev_pid=.*prev_state=(\S+) ==>", trace)
            if switch:
                switches[(switch.group(1), switch.group(2)[0])] += 1
    return wakeups, switches


def top_functions(stacks, n):
    """The functions with the most samples on top of the stack (self time)."""
    self_time = collections.Counter()
    total = sum(stacks.values())
    for stack, count in stacks.items():
        self_time[stack[-1]] += count
    return [(name, 100 * count / total) for name, count in self_time.most_common(n)]


def by_thread(stacks):
    threads = collections.Counter()
    for stack, count in stacks.items():
        threads[re.sub(r"\d+$", "N", stack[0])] += count
    total = sum(threads.values())
    return [(name, 100 * count / total) for name, count in threads.most_common()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="bazel-bin")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--svg", default="bench/profile_egressd.svg")
    parser.add_argument("--folded", help="also write the folded stacks here (one per line)")
    args = parser.parse_args()
    work = readable_tempdir("egress-profile-")
    tools = Tools(args.bin, None, work)
    rows = {}
    with Wan(tools.delay_link, rtt_ms=0) as wan:
        loopback = Loopback(wan, wan.CLIENT, tools, work)
        h2load_requests(loopback, "egressd", args.connections, 3)  # warm the pool
        for system in SYSTEMS:
            pids = loopback.server_pids(system)
            counts, (requests, run) = perf_stat(pids, lambda: h2load_requests(
                loopback, system, args.connections, args.seconds))
            rows[system] = (counts, requests, run)
        data = os.path.join(work, "perf.data")
        recorder = subprocess.Popen(["perf", "record", "-q", "-F", "499", "--call-graph",
                                     "dwarf,16384", "-o", data, "-p",
                                     str(loopback.egressd.pid)])
        h2load_requests(loopback, "egressd", args.connections, min(args.seconds, 5))
        recorder.send_signal(signal.SIGINT)
        recorder.wait()
        # Who wakes whom, machine-wide (h2load and nginx share the cores): 3 s of the load.
        sched_data = os.path.join(work, "sched.data")
        recorder = subprocess.Popen(["perf", "record", "-q", "-a", "-e",
                                     "sched:sched_wakeup,sched:sched_switch", "-o", sched_data])
        sched_requests, _ = h2load_requests(loopback, "egressd", args.connections, 3)
        recorder.send_signal(signal.SIGINT)
        recorder.wait()
    wakeups, switches = scheduler_events(subprocess.run(
        ["perf", "script", "-i", sched_data, "-F", "comm,tid,event,trace"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout)
    script = subprocess.run(["perf", "script", "-i", data], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, check=True).stdout
    stacks = flamegraph.fold(script.splitlines())
    if args.folded:
        with open(args.folded, "w") as out:
            for stack, count in stacks.items():
                out.write(f"{';'.join(stack)} {count}\n")
    with open(args.svg, "w") as out:
        out.write(flamegraph.render(flamegraph.tree(stacks),
                                    f"egressd, h2load -c{args.connections} Fetch of 1 KiB "
                                    "over HTTP/1.1 on loopback (perf record -F 499, DWARF)"))

    print(f"h2load -c{args.connections} -m1, {args.seconds} s per system, 1 KiB bodies, "
          "loopback\n")
    print("| system | requests/s | CPU us per request | context switches per request | "
          "wake-ups per request | migrations per request |")
    print("|---|---|---|---|---|---|")
    for system in SYSTEMS:
        counts, requests, run = rows[system]

        def per(event, scale=1.0):
            value = counts.get(event)
            return "n/a" if value is None else f"{value * scale / requests:.2f}"
        print(f"| {system} | {run['rps']:,.0f} | {per('task-clock', 1000)} | "
              f"{per('context-switches')} | {per('sched:sched_wakeup')} | "
              f"{per('cpu-migrations')} |")
    print(f"\negressd's samples by thread ({sum(stacks.values())} samples):\n")
    for name, share in by_thread(stacks):
        print(f"- {name}: {share:.1f} %")
    print("\nFunctions with the most samples of their own (self):\n")
    for name, share in top_functions(stacks, 25):
        print(f"- {share:.1f} % `{name}`")
    print(f"\nWake-ups per fetch by waker and wakee, machine-wide, 3 s of the same load on "
          f"egressd ({sched_requests} fetches):\n")
    for (waker, wakee), count in wakeups.most_common(8):
        print(f"- {waker} -> {wakee}: {count / sched_requests:.3f}")
    print("\nSwitches away from a thread per fetch (R: preempted while runnable; S, D: went "
          "to sleep):\n")
    for (thread, state), count in switches.most_common(8):
        print(f"- {thread} ({state}): {count / sched_requests:.3f}")
    print(f"\nwrote {args.svg}")


if __name__ == "__main__":
    main()
