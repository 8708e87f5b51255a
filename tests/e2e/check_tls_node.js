// Calls an egressd that serves TLS and guards its admin service with mTLS and a token
// through client/node: the config and the pools with the token, a fetch of URL and one of
// DENIED_URL as caller "billing", the config without the token. Prints one JSON object
// per call for tests/e2e/clients_test.cc to check.
// Usage: node check_tls_node.js CLIENT_DIR TARGET ADMIN_TARGET CA CERT KEY TOKEN_FILE URL
//        DENIED_URL
'use strict';

const fs = require('fs');
const path = require('path');
const [clientDir, target, adminTarget, ca, cert, key, tokenFile, url, deniedUrl] =
  process.argv.slice(2);
const { EgressClient } = require(path.resolve(clientDir, 'egress_client.js'));

async function report(call, action) {
  try {
    console.log(JSON.stringify({ call, ...(await action()) }));
  } catch (error) {
    console.log(JSON.stringify({ call, error: error.code, message: error.details }));
  }
}

async function main() {
  const adminTls = { caFile: ca, certFile: cert, keyFile: key };
  const egress = new EgressClient({
    target, adminTarget, tls: { caFile: ca }, adminTls,
    adminToken: fs.readFileSync(tokenFile, 'utf8').trim(),
    metadata: [['x-egress-caller', 'billing']],
  });
  const anonymous = new EgressClient({ target, adminTarget, adminTls });
  try {
    await report('config', async () => ({ caller_header: (await egress.getConfig()).policy.caller_header }));
    await report('pools', async () => ({ origins: (await egress.poolStats()).origins.length }));
    await report('fetch', async () => ({ status: (await egress.fetch(url)).statusCode }));
    await report('denied', async () => ({ status: (await egress.fetch(deniedUrl)).statusCode }));
    await report('no_token', async () => ({
      caller_header: (await anonymous.getConfig()).policy.caller_header }));
  } finally {
    egress.close();
    anonymous.close();
  }
}

main().catch((error) => { console.error(error); process.exitCode = 1; });
