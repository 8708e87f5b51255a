#!/usr/bin/python3
"""Fetches URL through client/python and prints header NAME as the client returns it:
one line "<hex of header_bytes> <header() encoded as UTF-8, in hex>", for
tests/e2e/clients_test.cc to check that a value that is not UTF-8 arrives byte for byte.
Usage: check_header_bytes.py STUBS_DIR CLIENT_DIR TARGET URL NAME"""

import sys

sys.path[:0] = [sys.argv[1], sys.argv[2]]
from egress_client import EgressClient  # noqa: E402


def main():
    _, _, _, target, url, name = sys.argv
    with EgressClient(target) as egress:
        r = egress.fetch(url)
        print(r.header_bytes(name).hex(), r.header(name).encode().hex())


main()
