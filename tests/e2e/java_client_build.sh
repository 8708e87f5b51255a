#!/usr/bin/env bash
# client/java/build.sh DIR, done once per machine for the same inputs: when
# EGRESS_CLIENT_BUILD_CACHE names a directory (.bazelrc sets it for tests), DIR becomes a
# link to CACHE/java-KEY, built there by the first test that needs it (the others wait on
# its lock). KEY is a hash of what the build reads: client/java, proto/, the tools'
# versions and Debian's jars. javac takes 15 core-seconds a build, and the client tests
# build it in every build of tools/test.sh (default, ASan, TSan) and in three tests.
#   tests/e2e/java_client_build.sh DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"  # the runfiles' root
out="${1:?usage: java_client_build.sh DIR}"
cache="${EGRESS_CLIENT_BUILD_CACHE:-}"
if [[ -z "$cache" ]]; then
  exec "$root/client/java/build.sh" "$out"
fi

key=$( (
  cd "$root" && find -L client/java proto -type f -print0 | sort -z | xargs -0 sha256sum
  protoc --version
  javac -version 2>&1
  ls -lL --time-style=full-iso /usr/bin/grpc_java_plugin /usr/share/java/
) | sha256sum | cut -c1-16)
mkdir -p "$cache"
build="$cache/java-$key"
exec 9> "$build.lock"
flock 9
if [[ ! -e "$build/built" ]]; then
  "$root/client/java/build.sh" "$build"
  touch "$build/built"
fi
rm -rf "$out"
ln -s "$build" "$out"
