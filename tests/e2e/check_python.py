#!/usr/bin/python3
"""Calls egressd through client/python twice for URL, then once for a malformed URL, once
for LARGE_URL (a body over gRPC's default message limit) and once for DENIED_URL (which
egressd's policy denies); prints one JSON object per call for tests/e2e/clients_test.cc
to check. With --asyncio the same calls go through egress_client.aio's AsyncEgressClient.
Usage: check_python.py STUBS_DIR CLIENT_DIR TARGET URL LARGE_URL DENIED_URL [--asyncio]"""

import asyncio
import base64
import json
import sys

sys.path[:0] = [sys.argv[1], sys.argv[2]]
from egress_client import EgressClient, EgressError  # noqa: E402
from egress_client.aio import AsyncEgressClient  # noqa: E402


class AsyncClientRunToCompletion:
    """An AsyncEgressClient, made inside its event loop, whose fetches run to completion
    on that loop: the same calls below check both clients."""

    def __init__(self, target):
        self._loop = asyncio.new_event_loop()
        self._client = self._loop.run_until_complete(self._open(target))

    @staticmethod
    async def _open(target):
        return AsyncEgressClient(target)

    def fetch(self, url, **kwargs):
        return self._loop.run_until_complete(self._client.fetch(url, **kwargs))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._loop.run_until_complete(self._client.close())
        self._loop.close()


def failure(error):
    """An EgressError as the test reads it: the code, the message, the ErrorInfo."""
    return {"error": error.code.name, "message": error.message, "reason": error.reason,
            "domain": error.domain, "rule": error.metadata.get("rule"),
            "host": error.metadata.get("host")}


def main():
    target, url, large_url, denied_url = sys.argv[3:7]
    client = AsyncClientRunToCompletion if sys.argv[7:] == ["--asyncio"] else EgressClient
    with client(target) as egress:
        for _ in range(2):
            r = egress.fetch(url)
            print(json.dumps({"status": r.status_code, "content_length": r.header("Content-Length"),
                              "body": base64.b64encode(r.body).decode(), "reused": r.reused,
                              "connection_id": str(r.connection_id)}))
        try:
            egress.fetch("not a url")
            print(json.dumps({"error": "none"}))
        except EgressError as error:
            print(json.dumps(failure(error)))
        try:
            # Over egressd's default max_body_bytes: the client's receive limit must allow it.
            r = egress.fetch(large_url, max_body_bytes=8 << 20)
            print(json.dumps({"large_status": r.status_code, "large_bytes": str(len(r.body))}))
        except EgressError as error:
            print(json.dumps(failure(error)))
        try:
            egress.fetch(denied_url)
            print(json.dumps({"error": "none"}))
        except EgressError as error:
            print(json.dumps(failure(error)))


main()
