#!/usr/bin/env bash
# The tests tagged single_threaded start no thread, as their tag says: the TSan build
# leaves them out (TSan's reports are about threads: races, lock order; ASan and UBSan
# still run them). Runs each one's default build, from its runfiles, under strace, and
# fails when one starts a thread (clone or clone3) or fails, or when none is found.
# Needs them built: bazel build //tests/...
set -uo pipefail
cd "$(dirname "$0")/.."
if ! targets=$(bazel query --noshow_progress \
    'attr(tags, "\bsingle_threaded\b", kind(cc_test, //tests/...))') || [[ -z "$targets" ]]; then
  echo "single_threaded: FAILED: no test so tagged found (bazel query)"
  exit 1
fi
status=0
work=$(mktemp -d)
for target in $targets; do
  path="$(echo "${target#//}" | tr : /)"
  runfiles="$PWD/bazel-bin/$path.runfiles"
  mkdir -p "$work/tmp"
  if ! (cd "$runfiles/egress" && TEST_SRCDIR="$runfiles" TEST_TMPDIR="$work/tmp" \
      strace -f -qq -e trace=clone,clone3 -o "$work/trace" "./$path" > /dev/null 2>&1); then
    echo "$target: FAILED (run by tools/check_single_threaded.sh)"
    status=1
  elif grep -q clone "$work/trace"; then
    echo "$target: FAILED: it starts a thread, so it is no longer single_threaded; drop" \
      "the tag so that the TSan build covers it"
    status=1
  fi
  rm -rf "$work/tmp"
done
rm -rf "$work"
((status == 0)) && echo "single_threaded: $(wc -w <<< "$targets") tests so tagged ran without starting a thread"
exit $status
