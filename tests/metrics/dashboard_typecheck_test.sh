#!/usr/bin/env bash
# The Grafana dashboard type-checks against @grafana/schema's Dashboard type. The JSON is
# pasted in as an object literal so that TypeScript checks literal types and rejects
# unknown fields. The npm packages come from tools/install_deps.sh (the test itself has
# no network).
set -euo pipefail
npm_dir="${EGRESS_NPM_DIR:-/opt/egress-npm}"
work="$TEST_TMPDIR/dashboard"
mkdir -p "$work"
ln -sfn "$npm_dir/node_modules" "$work/node_modules"
{
  echo "import type { Dashboard } from '@grafana/schema';"
  printf 'const dashboard: Dashboard = '
  cat "$TEST_SRCDIR/$TEST_WORKSPACE/k8s/base/grafana/egress-dashboard.json"
  echo ';'
  echo 'export default dashboard;'
} > "$work/dashboard.ts"
cat > "$work/tsconfig.json" <<'JSON'
{"compilerOptions": {"strict": true, "noEmit": true, "module": "commonjs",
  "moduleResolution": "node", "target": "es2020", "skipLibCheck": true},
 "files": ["dashboard.ts"]}
JSON
"$npm_dir/node_modules/.bin/tsc" -p "$work/tsconfig.json"
echo "dashboard type-checks against @grafana/schema $(node -p "require('$npm_dir/node_modules/@grafana/schema/package.json').version")"
