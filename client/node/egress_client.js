// A small Node client for egressd: @grpc/grpc-js with stubs generated at load time from
// proto/egress/v1/egress.proto by @grpc/proto-loader, and promises in front.
//
//   const { EgressClient } = require('./egress_client');
//   const egress = new EgressClient({ target: '127.0.0.1:50051' });
//   const response = await egress.fetch('https://api.example.com/v1/items', { headOnly: true });
//   console.log(response.statusCode, response.reused);
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = process.env.EGRESS_PROTO_ROOT || path.join(__dirname, '..', '..', 'proto');
const definition = protoLoader.loadSync('egress/v1/egress.proto', {
  includeDirs: [PROTO_ROOT, '/usr/include'],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
});
const v1 = grpc.loadPackageDefinition(definition).egress.v1;

// egressd could not give an HTTP answer: `code` is the gRPC code's name
// (INVALID_ARGUMENT, PERMISSION_DENIED, UNAVAILABLE, DEADLINE_EXCEEDED, ...).
class EgressError extends Error {
  constructor(error) {
    const code = grpc.status[error.code] || String(error.code);
    super(`${code}: ${error.details}`);
    this.code = code;
    this.details = error.details;
  }
}

class EgressClient {
  constructor({ target = '127.0.0.1:50051', adminTarget = '127.0.0.1:50052',
                timeoutMs = 30000 } = {}) {
    const insecure = grpc.credentials.createInsecure();
    this.egress = new v1.Egress(target, insecure);
    this.admin = new v1.TransportAdmin(adminTarget, insecure);
    this.timeoutMs = timeoutMs;
  }

  // One HTTP request through egressd. headOnly: status and headers (egressd drains the
  // body); prefix: the first N bytes. Resolves with the response, HTTP errors included;
  // rejects with EgressError when there is no HTTP answer.
  async fetch(url, { method = '', headers = [], body = Buffer.alloc(0), headOnly = false,
                     prefix, maxBodyBytes = 0, timeoutMs, followRedirects = false } = {}) {
    const request = {
      url, method, body, follow_redirects: followRedirects,
      // A Buffer value is sent byte for byte.
      headers: headers.map(([name, value]) => (Buffer.isBuffer(value)
        ? { name, value_bytes: value } : { name, value })),
      body_mode: headOnly ? 'BODY_MODE_NONE'
        : prefix !== undefined ? 'BODY_MODE_PREFIX' : 'BODY_MODE_FULL',
      max_body_bytes: prefix !== undefined ? prefix : maxBodyBytes,
    };
    const raw = await this.call(this.egress, 'Fetch', request, timeoutMs);
    const received = raw.headers.map((h) => [h.name, h.value]);
    return {
      statusCode: raw.status_code,
      headers: received,
      // The first value of header `name` (case-insensitive), or undefined. A value that
      // is not UTF-8 comes as its bytes read as ISO-8859-1 (latin1): one char per byte.
      header: (name) => {
        const h = raw.headers.find((x) => x.name.toLowerCase() === name.toLowerCase());
        return h && (h.value_bytes.length ? h.value_bytes.toString('latin1') : h.value);
      },
      // The same value exactly as the upstream sent it, as a Buffer, or undefined.
      headerBytes: (name) => {
        const h = raw.headers.find((x) => x.name.toLowerCase() === name.toLowerCase());
        return h && (h.value_bytes.length ? h.value_bytes : Buffer.from(h.value));
      },
      body: raw.body,
      bodyTruncated: raw.body_truncated,
      reused: raw.connection.reused,
      connectionId: raw.connection.connection_id,
      raw,
    };
  }

  getConfig() { return this.call(this.admin, 'GetConfig', {}); }
  updateConfig(config) { return this.call(this.admin, 'UpdateConfig', { config }); }
  poolStats() { return this.call(this.admin, 'GetPoolStats', {}); }

  close() {
    this.egress.close();
    this.admin.close();
  }

  call(stub, method, request, timeoutMs) {
    const deadline = new Date(Date.now() + (timeoutMs || this.timeoutMs));
    return new Promise((resolve, reject) => {
      stub[method](request, { deadline }, (error, response) => {
        if (error) reject(new EgressError(error));
        else resolve(response);
      });
    });
  }
}

module.exports = { EgressClient, EgressError };
