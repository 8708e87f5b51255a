#!/usr/bin/env bash
# client/java/build.sh DIR, done once per machine for the same inputs: when
# EGRESS_CLIENT_BUILD_CACHE names a directory (.bazelrc sets it for tests), DIR becomes a
# link to CACHE/java-KEY, built there by the first test that needs it (the others wait on
# its lock). KEY is a hash of what the build reads: client/java, proto/, this script,
# protoc and its library, grpc_java_plugin, javac, Debian's jars and the .proto files
# protoc imports from /usr/include. Building takes about 15 core-seconds, and
# tools/test.sh runs the two tests that need it seven times. Builds unused for a week
# are removed.
#   tests/e2e/java_client_build.sh DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"  # the runfiles' root
out="${1:?usage: java_client_build.sh DIR}"
cache="${EGRESS_CLIENT_BUILD_CACHE:-}"
# A link left by an earlier run: build.sh would write through it into the cache.
if [[ -L "$out" ]]; then rm -f "$out"; fi
if [[ -z "$cache" ]]; then
  exec "$root/client/java/build.sh" "$out"
fi
# Whatever is cached there runs in the tests: only a directory of our own is trusted.
mkdir -p -m 700 "$cache"
if [[ -L "$cache" || ! -O "$cache" ]]; then
  echo "java_client_build.sh: $cache is not a directory of this user's own" >&2
  exit 1
fi

key=$( (
  cd "$root" && find -L client/java proto tests/e2e/java_client_build.sh -type f -print0 \
    | sort -z | xargs -0 sha256sum
  # Size and time of each tool, library and jar (a broken link counts as itself).
  find -L /usr/bin/protoc "$(realpath /usr/bin/javac)" /usr/bin/grpc_java_plugin \
    $(ldd /usr/bin/protoc | awk '/libprotoc/ { print $3 }') /usr/share/java \
    /usr/include/google/protobuf -printf '%p %s %T@\n' | sort
) | sha256sum | cut -c1-16)
build="$cache/java-$key"
exec 9> "$build.lock"
flock 9
if [[ ! -e "$build/built" ]]; then
  "$root/client/java/build.sh" "$build"
fi
touch "$build/built"  # the time it was last used

# Builds unused for 7 days, each under its own lock (skipped while a test holds it).
for old in $(find "$cache" -maxdepth 2 -path "$cache/java-*/built" -mtime +7 -printf '%h\n'); do
  (flock -n 8 && rm -rf "$old") 8> "$old.lock" || true
done

ln -s "$build" "$out"
