// Calls egressd through client/node twice for URL, then once for a malformed URL, once for
// LARGE_URL (a body over gRPC's default message limit) and once for DENIED_URL (which
// egressd's policy denies); prints one JSON object per call for
// tests/e2e/clients_test.cc to check.
// Usage: node check_node.js CLIENT_DIR TARGET URL LARGE_URL DENIED_URL
'use strict';

const path = require('path');
const [clientDir, target, url, largeUrl, deniedUrl] = process.argv.slice(2);
const { EgressClient } = require(path.resolve(clientDir, 'egress_client.js'));

// An EgressError as the test reads it: the code, the message, the ErrorInfo.
function failure(error) {
  return { error: error.code, message: error.details, reason: error.reason,
           domain: error.domain, rule: error.metadata.rule, host: error.metadata.host };
}

async function main() {
  const egress = new EgressClient({ target });
  try {
    for (let i = 0; i < 2; ++i) {
      const r = await egress.fetch(url);
      console.log(JSON.stringify({ status: r.statusCode, content_length: r.header('Content-Length'),
                                   body: r.body.toString('base64'), reused: r.reused,
                                   connection_id: String(r.connectionId) }));
    }
    try {
      await egress.fetch('not a url');
      console.log(JSON.stringify({ error: 'none' }));
    } catch (error) {
      console.log(JSON.stringify(failure(error)));
    }
    try {
      // Over egressd's default max_body_bytes: the client's receive limit must allow it.
      const r = await egress.fetch(largeUrl, { maxBodyBytes: 8 * 1024 * 1024 });
      console.log(JSON.stringify({ large_status: r.statusCode, large_bytes: String(r.body.length) }));
    } catch (error) {
      console.log(JSON.stringify(failure(error)));
    }
    try {
      await egress.fetch(deniedUrl);
      console.log(JSON.stringify({ error: 'none' }));
    } catch (error) {
      console.log(JSON.stringify(failure(error)));
    }
  } finally {
    egress.close();
  }
}

main().catch((error) => { console.error(error); process.exitCode = 1; });
