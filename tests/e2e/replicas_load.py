#!/usr/bin/python3
"""One long-lived EgressClient (one channel, gRPC's round_robin by default) fetching URL
over and over until STOP_FILE exists, then one JSON line: {"ok": calls answered HTTP 200,
"failed": the others, "errors": the first few}. tests/e2e/replicas_test.cc tells which
replica answered from each replica's metrics (the URL's host names the language).
Usage: replicas_load.py STUBS_DIR CLIENT_DIR TARGET URL STOP_FILE"""

import json
import os
import sys
import time

sys.path[:0] = [sys.argv[1], sys.argv[2]]
from egress_client import EgressClient, EgressError  # noqa: E402


def main():
    _, _, _, target, url, stop_file = sys.argv
    ok, failed, errors = 0, 0, []
    # Re-resolution at most every 0.5 s (gRPC's default: 30 s), so that a GOAWAY from a
    # replica's connection age picks up a replica that joined within the test's time.
    with EgressClient(target, timeout=10,
                      options=[("grpc.dns_min_time_between_resolutions_ms", 500)]) as egress:
        while not os.path.exists(stop_file):
            try:
                response = egress.fetch(url, head_only=True)
                if response.status_code == 200:
                    ok += 1
                else:
                    failed += 1
                    errors.append(f"HTTP {response.status_code}")
            except EgressError as error:
                failed += 1
                errors.append(str(error))
            time.sleep(0.005)  # a steady load, not a benchmark
    print(json.dumps({"ok": ok, "failed": failed, "errors": errors[:5]}))


if __name__ == "__main__":
    main()
