#!/usr/bin/python3
"""Calls an egressd that serves TLS and guards its admin service with mTLS and a token
through client/python: the config and the pools with the token, a fetch of URL and one
of DENIED_URL as caller "billing", the config without the token. Prints one JSON
object per call for tests/e2e/clients_test.cc to check.
Usage: check_tls_python.py STUBS_DIR CLIENT_DIR TARGET ADMIN_TARGET CA CERT KEY TOKEN_FILE
       URL DENIED_URL"""

import json
import sys

sys.path[:0] = [sys.argv[1], sys.argv[2]]
from egress_client import EgressClient, EgressError, Tls  # noqa: E402


def report(call, action):
    try:
        print(json.dumps({"call": call, **action()}))
    except EgressError as error:
        print(json.dumps({"call": call, "error": error.code.name, "message": error.message}))


def main():
    _, _, _, target, admin_target, ca, cert, key, token_file, url, denied_url = sys.argv
    with open(token_file) as file:
        token = file.read().strip()
    admin_tls = Tls(ca_file=ca, cert_file=cert, key_file=key)
    with EgressClient(target, admin_target, tls=Tls(ca_file=ca), admin_tls=admin_tls,
                      admin_token=token, metadata=[("x-egress-caller", "billing")]) as egress:
        report("config", lambda: {"caller_header": egress.get_config().policy.caller_header})
        report("pools", lambda: {"origins": len(egress.pool_stats().origins)})
        report("fetch", lambda: {"status": egress.fetch(url).status_code})
        report("denied", lambda: {"status": egress.fetch(denied_url).status_code})
    with EgressClient(target, admin_target, admin_tls=admin_tls) as anonymous:
        report("no_token", lambda: {"caller_header": anonymous.get_config().policy.caller_header})


main()
