#!/usr/bin/python3
"""Calls egressd through client/python twice for URL, then once for a malformed URL and
once for LARGE_URL (a body over gRPC's default message limit); prints one JSON object per
call for tests/e2e/clients_test.cc to check.
Usage: check_python.py STUBS_DIR CLIENT_DIR TARGET URL LARGE_URL"""

import base64
import json
import sys

sys.path[:0] = [sys.argv[1], sys.argv[2]]
from egress_client import EgressClient, EgressError  # noqa: E402


def main():
    _, _, _, target, url, large_url = sys.argv
    with EgressClient(target) as egress:
        for _ in range(2):
            r = egress.fetch(url)
            print(json.dumps({"status": r.status_code, "content_length": r.header("Content-Length"),
                              "body": base64.b64encode(r.body).decode(), "reused": r.reused,
                              "connection_id": str(r.connection_id)}))
        try:
            egress.fetch("not a url")
            print(json.dumps({"error": "none"}))
        except EgressError as error:
            print(json.dumps({"error": error.code.name, "message": error.message}))
        try:
            r = egress.fetch(large_url)
            print(json.dumps({"large_status": r.status_code, "large_bytes": str(len(r.body))}))
        except EgressError as error:
            print(json.dumps({"error": error.code.name, "message": error.message}))


main()
