#!/usr/bin/env bash
# The alert and recording rules are valid, and each alert fires (and stays silent) on
# the synthetic series of egress-rules.test.yaml.
set -euo pipefail
cd "$TEST_SRCDIR/$TEST_WORKSPACE/k8s/base/prometheus"
promtool check rules egress-rules.yaml
promtool test rules egress-rules.test.yaml
