// One long-lived EgressClient (one channel, round_robin by default) fetching URL from
// two loops at once until STOP_FILE exists, then one JSON line: {"ok": calls answered
// HTTP 200, "failed": the others, "errors": the first few}. tests/e2e/replicas_test.cc
// tells which replica answered from each replica's metrics (the URL's host names the
// language).
// Usage: node replicas_load.js CLIENT_DIR TARGET URL STOP_FILE
'use strict';

const fs = require('fs');
const path = require('path');
const [clientDir, target, url, stopFile] = process.argv.slice(2);
const { EgressClient } = require(path.resolve(clientDir, 'egress_client.js'));

async function main() {
  // Re-resolution at most every 0.5 s (grpc-js's default: 30 s), so that a GOAWAY from a
  // replica's connection age picks up a replica that joined within the test's time.
  const egress = new EgressClient({
    target, timeoutMs: 10000,
    channelOptions: { 'grpc.dns_min_time_between_resolutions_ms': 500 },
  });
  const result = { ok: 0, failed: 0, errors: [] };
  const loop = async () => {
    while (!fs.existsSync(stopFile)) {
      try {
        const r = await egress.fetch(url, { headOnly: true });
        if (r.statusCode === 200) {
          result.ok += 1;
        } else {
          result.failed += 1;
          result.errors.push(`HTTP ${r.statusCode}`);
        }
      } catch (error) {
        result.failed += 1;
        result.errors.push(error.message);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));  // a steady load
    }
  };
  await Promise.all([loop(), loop()]);
  egress.close();
  result.errors = result.errors.slice(0, 5);
  console.log(JSON.stringify(result));
}

main().catch((error) => { console.error(error); process.exit(1); });
