#!/usr/bin/env bash
# The egress_client package as pip would install it, in DIR (default client/python/gen):
# its sources and what stubs.py generates (the stubs of egress.v1 and google.rpc, the
# version). For running from the repository with DIR first on sys.path (PYTHONPATH):
#   client/python/generate.sh [DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/gen}"
mkdir -p "$out/egress_client"
cp "$here"/egress_client/*.py "$here/egress_client/py.typed" "$out/egress_client/"
/usr/bin/python3 "$here/stubs.py" "$out/egress_client"
