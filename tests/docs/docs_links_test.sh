#!/usr/bin/env bash
# Every relative link in README.md and docs/*.md points at a file and, with an anchor,
# at a heading that exists (GitHub's anchors). A link to a file outside README.md and
# docs/ needs that file in this test's data (tests/docs/BUILD).
set -euo pipefail
cd "$TEST_SRCDIR/$TEST_WORKSPACE"
python3 tests/docs/check_links.py . README.md docs/*.md || {
  echo "(a link to a file outside README.md and docs/ needs that file in tests/docs/BUILD's data)"
  exit 1
}
