#!/usr/bin/env bash
# Runs a test in network and mount namespaces of its own: only loopback is up, so nothing
# it sends can leave the machine whatever the code under test does, and /etc/hosts is a
# test file naming a few hosts that resolve inward (for the egress policy tests). Other
# names go to a DNS server at 127.0.0.53 that is not there unless a test starts one (to
# make DNS fail, or stall), waited for one second at most.
set -euo pipefail
exec unshare --net --mount -- bash -c '
  set -euo pipefail
  ip link set lo up
  hosts=$(mktemp)
  cat > "$hosts" <<HOSTS
127.0.0.1 localhost
::1 localhost ip6-localhost
127.0.0.1 loop.test
10.1.2.3 internal.test
169.254.169.254 metadata.test
127.0.0.2 redirector.test
HOSTS
  mount --bind "$hosts" /etc/hosts
  resolv=$(mktemp)
  printf "nameserver 127.0.0.53\noptions timeout:1 attempts:1\n" > "$resolv"
  mount --bind "$resolv" /etc/resolv.conf
  exec "$@"' run_in_netns "$@"
