#!/usr/bin/env bash
# Does what docs/clients.md says for one language, as a new user of it would: runs the
# "install" block in a copy of the repository (the parts the runfiles hold), deletes that
# copy, writes the "file" blocks into a fresh project directory ($APP), runs the "build"
# block there if there is one, then the "run" block, with egressd's address and the URL
# put in place of the examples' 127.0.0.1:50051 and https://example.com/. Prints what
# the run printed on stdout.
#   try_client_package.sh LANG TARGET URL WORKDIR
# The blocks are the fenced blocks after "<!-- test LANG install -->",
# "<!-- test LANG file NAME -->", "<!-- test LANG build -->" and "<!-- test LANG run -->".
set -euo pipefail
lang="$1" target="$2" url="$3" work="$4"
root="$(cd "$(dirname "$0")/../.." && pwd)"  # the runfiles' root, not the source tree
doc="$root/docs/clients.md"

# The block after marker line $1 (an awk regex), as written.
block() {
  awk -v marker="$1" '
    $0 ~ marker { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$doc"
}

rm -rf "$work"
mkdir -p "$work/repo" "$work/app" "$work/home"
cp -rL "$root/client" "$root/proto" "$work/repo/"
export APP="$work/app" HOME="$work/home"
# Offline, as tests are: npm installs from the cache tools/install_deps.sh filled.
export npm_config_offline=true npm_config_cache="${EGRESS_NPM_DIR:-/opt/egress-npm}/cache"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
# Go with its own toolchain and no cgo, whatever the machine's go env says.
export GOTOOLCHAIN=local GOENV=off GOFLAGS= CGO_ENABLED=0
# Maven's ~ is Java's user.home: the passwd entry's home, not $HOME.
export MAVEN_OPTS="-Duser.home=$HOME"

install="$(block "^<!-- test $lang install -->$")"
run="$(block "^<!-- test $lang run -->$")"
[[ -n "$install" && -n "$run" ]] || { echo "docs/clients.md: no $lang install or run block" >&2; exit 2; }
(cd "$work/repo" && bash -euo pipefail -c "$install") >"$work/install.log" 2>&1 ||
  { echo "install failed:" >&2; cat "$work/install.log" >&2; exit 1; }
rm -rf "$work/repo"  # from here on, the project has only what it installed

grep -o "^<!-- test $lang file [^ ]* -->$" "$doc" | while read -r _ _ _ _ name _; do
  mkdir -p "$(dirname "$APP/$name")"
  block "^<!-- test $lang file ${name//./\\.} -->$" >"$APP/$name"
done
build="$(block "^<!-- test $lang build -->$")"
if [[ -n "$build" ]]; then
  (cd "$APP" && bash -euo pipefail -c "$build") >"$work/build.log" 2>&1 ||
    { echo "build failed:" >&2; cat "$work/build.log" >&2; exit 1; }
fi
run="${run//127.0.0.1:50051/$target}"
run="${run//https:\/\/example.com\//$url}"
# Without terminal colour codes (mvn -q ends with an ANSI reset, whatever it is told).
bash -euo pipefail -c "$run" | sed $'s/\e\\[[0-9;]*m//g'
