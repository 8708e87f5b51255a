#!/usr/bin/env bash
# Prints the Bazel output base of a sanitizer build (asan, tsan) of this checkout: its own
# server and outputs, kept between runs, so that it builds while another build's tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "${XDG_CACHE_HOME:-$HOME/.cache}/egress-$1-bazel/$(pwd | md5sum | cut -c1-12)"
