#!/usr/bin/env bash
# Runs a test in a network namespace of its own with only loopback up, so that nothing
# it sends can leave the machine, whatever the code under test does.
set -euo pipefail
exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' run_in_netns "$@"
