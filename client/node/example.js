#!/usr/bin/env node
// Fetches a URL twice through egressd, head only, and shows that the second call reused
// the upstream connection.  Usage: node example.js URL [egressd address]
'use strict';

const { EgressClient } = require('./egress_client');

async function main() {
  const [url, target = '127.0.0.1:50051'] = process.argv.slice(2);
  const egress = new EgressClient({ target });
  try {
    for (const attempt of [1, 2]) {
      const response = await egress.fetch(url, { headOnly: true });
      console.log(`fetch ${attempt}: HTTP ${response.statusCode}, ` +
                  `content-type ${response.header('content-type')}, ` +
                  `connection ${response.connectionId}, reused ${response.reused}`);
    }
  } catch (error) {
    console.error(`egressd: ${error.message}`);
    process.exitCode = 1;
  } finally {
    egress.close();
  }
}

main();
