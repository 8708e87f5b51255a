// Fetches URL through client/node and prints header NAME as the client returns it: one
// line "<hex of headerBytes()> <header() encoded as UTF-8, in hex>", for
// tests/e2e/clients_test.cc to check that a value that is not UTF-8 arrives byte for byte.
// Usage: node check_header_bytes.js CLIENT_DIR TARGET URL NAME
'use strict';

const path = require('path');
const [clientDir, target, url, name] = process.argv.slice(2);
const { EgressClient } = require(path.resolve(clientDir, 'egress_client.js'));

async function main() {
  const egress = new EgressClient({ target });
  try {
    const r = await egress.fetch(url);
    console.log(r.headerBytes(name).toString('hex'), Buffer.from(r.header(name)).toString('hex'));
  } finally {
    egress.close();
  }
}

main().catch((error) => { console.error(error); process.exitCode = 1; });
