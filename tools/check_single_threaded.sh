#!/usr/bin/env bash
# The tests tagged single_threaded start no thread, as their tag says: the TSan build
# leaves them out (a data race takes two threads, so TSan has nothing to find in them).
# Runs each one's default build, from its runfiles, under strace, and fails when one
# starts a thread (clone or clone3) or fails. Needs them built: bazel build //tests/...
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
trace=$(mktemp)
for target in $(bazel query --noshow_progress \
    'attr(tags, "\bsingle_threaded\b", kind(cc_test, //tests/...))'); do
  path="$(echo "${target#//}" | tr : /)"
  if ! (cd "bazel-bin/$path.runfiles/egress" && TEST_SRCDIR=.. TEST_TMPDIR="$(mktemp -d)" \
      strace -f -qq -e trace=clone,clone3 -o "$trace" "./$path" > /dev/null 2>&1); then
    echo "$target: FAILED (run by tools/check_single_threaded.sh)"
    status=1
  elif grep -q clone "$trace"; then
    echo "$target: FAILED: it starts a thread, so it is no longer single_threaded; drop" \
      "the tag so that the TSan build covers it"
    status=1
  fi
done
rm -f "$trace"
((status == 0)) && echo "single_threaded: every test so tagged ran without starting a thread"
exit $status
