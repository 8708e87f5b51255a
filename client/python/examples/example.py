#!/usr/bin/python3
"""Fetches a URL twice through egressd, head only, and shows that the second call reused
the upstream connection.  Usage: example.py URL [egressd address]
(with egress_client installed, or generate.sh's directory on PYTHONPATH)"""

import sys

from egress_client import EgressClient, EgressError


def main():
    url = sys.argv[1]
    target = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:50051"
    with EgressClient(target) as egress:
        try:
            for attempt in (1, 2):
                response = egress.fetch(url, head_only=True)
                print(f"fetch {attempt}: HTTP {response.status_code}, "
                      f"content-type {response.header('content-type')}, "
                      f"connection {response.connection_id}, reused {response.reused}")
        except EgressError as error:
            print(f"egressd: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
