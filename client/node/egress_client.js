// A small Node client for egressd: @grpc/grpc-js with stubs generated at load time from
// proto/egress/v1/egress.proto by @grpc/proto-loader, and promises in front.
//
//   const { EgressClient } = require('egress-client');  // types: index.d.ts
//   const egress = new EgressClient({ target: '127.0.0.1:50051' });
//   const response = await egress.fetch('https://api.example.com/v1/items', { headOnly: true });
//   console.log(response.statusCode, response.reused);
//
// Against an egressd that serves TLS and guards its admin service with mTLS and a token:
//
//   new EgressClient({ target: 'egressd:50051', adminTarget: 'egressd:50052',
//                      tls: { caFile: 'ca.pem' },
//                      adminTls: { caFile: 'ca.pem', certFile: 'me.pem', keyFile: 'me.key' },
//                      adminToken: fs.readFileSync('admin.token', 'utf8').trim(),
//                      metadata: [['x-egress-caller', 'billing']] });
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

// The protos npm pack put in the package (prepack.js), or the repository's.
const PROTO_ROOT = process.env.EGRESS_PROTO_ROOT ||
  [path.join(__dirname, 'proto'), path.join(__dirname, '..', '..', 'proto')].find(
    (dir) => fs.existsSync(path.join(dir, 'egress/v1/egress.proto')));
const definition = protoLoader.loadSync('egress/v1/egress.proto', {
  includeDirs: [PROTO_ROOT, '/usr/include'],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
});
const v1 = grpc.loadPackageDefinition(definition).egress.v1;

// google.rpc.Status, ErrorInfo and RetryInfo, to read the grpc-status-details-bin trailer
// of an error. proto-loader makes gRPC stubs, not message codecs: these come from
// protobufjs, the parser it runs on (google/protobuf/*.proto are protobufjs' own copies).
const rpc = new protobuf.Root();
rpc.resolvePath = (origin, target) => path.join(PROTO_ROOT, target);
rpc.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'], { keepCase: true });
const RpcStatus = rpc.lookupType('google.rpc.Status');
const detailTypes = new Map(['ErrorInfo', 'RetryInfo'].map(
  (name) => [`type.googleapis.com/google.rpc.${name}`, rpc.lookupType(`google.rpc.${name}`)]));

// The ErrorInfo and RetryInfo of the google.rpc.Status in `trailers`, as plain objects
// under their type names: { ErrorInfo, RetryInfo }, each one undefined when absent.
function statusDetails(trailers) {
  const [trailer] = trailers ? trailers.get('grpc-status-details-bin') : [];
  if (!trailer) return {};
  let status;
  try {
    status = RpcStatus.decode(trailer);
  } catch (error) {
    return {};  // details left out: the code and the message still say what happened
  }
  const details = {};
  for (const { type_url: typeUrl, value } of status.details) {
    const type = detailTypes.get(typeUrl);
    if (type) {
      details[type.name] = type.toObject(type.decode(value), { longs: Number, defaults: true });
    }
  }
  return details;
}

// egressd could not give an HTTP answer: `code` is the gRPC code's name
// (INVALID_ARGUMENT, PERMISSION_DENIED, UNAVAILABLE, DEADLINE_EXCEEDED, ...), `details`
// egressd's message. Why, when egressd said so (google.rpc.ErrorInfo): `reason`, a stable
// name such as 'POLICY_DENIED', 'INVALID_URL' or 'CONCURRENCY_LIMIT'; `domain`,
// 'egress.v1'; `metadata`, an object (for POLICY_DENIED: rule, host, origin and, when an
// address rule decided, address). Without it (e.g. an error gRPC itself made) reason and
// domain are undefined and metadata is {}. `retryDelayMs`: how long egressd asks the
// caller to wait before a retry (google.rpc.RetryInfo), or undefined.
class EgressError extends Error {
  constructor(error) {
    const code = grpc.status[error.code] || String(error.code);
    const { ErrorInfo: info, RetryInfo: retry } = statusDetails(error.metadata);
    super(`${code}: ${error.details}${info ? ` [${info.reason}]` : ''}`);
    this.code = code;
    this.details = error.details;
    this.reason = info && info.reason;
    this.domain = info && info.domain;
    this.metadata = info ? info.metadata : {};
    this.retryDelayMs = retry
      ? retry.retry_delay.seconds * 1000 + retry.retry_delay.nanos / 1e6 : undefined;
  }
}

// Credentials and channel options for `tls`: undefined is plaintext; { caFile (PEM
// roots egressd's certificate must chain to; none: the system's), certFile and keyFile
// (mTLS), serverName (the name egressd's certificate carries when it is not the target's
// host) }, every field optional.
// extra: the caller's channel options; balance: round_robin unless they choose a policy.
function channel(tls, extra = {}, balance = false) {
  // Responses of any size: egressd bounds bodies itself (at most
  // limits.max_body_bytes_ceiling); gRPC's default of 4 MiB would refuse a FULL body a
  // caller asks for with a max_body_bytes over egressd's default (4 MiB - 256 KiB).
  const unlimited = { 'grpc.max_receive_message_length': -1, ...extra };
  if (balance && !('grpc.service_config' in extra) && !('grpc.lb_policy_name' in extra)) {
    unlimited['grpc.service_config'] = DEFAULT_SERVICE_CONFIG;
  }
  if (!tls) return { credentials: grpc.credentials.createInsecure(), options: unlimited };
  if (!tls.certFile !== !tls.keyFile) throw new Error('tls: certFile and keyFile go together');
  const read = (file) => (file ? fs.readFileSync(file) : null);
  return {
    credentials: grpc.credentials.createSsl(read(tls.caFile), read(tls.keyFile), read(tls.certFile)),
    options: tls.serverName
      ? { ...unlimited, 'grpc.ssl_target_name_override': tls.serverName } : unlimited,
  };
}

// The service config every client of egressd defaults to: calls round robin over every
// address the target resolves to (gRPC's own default, pick_first, sends them all to one).
// Its healthCheckConfig (the C-core clients' health checking) is one grpc-js ignores:
// here a stopping replica's refusals are retried instead (see fetch).
const DEFAULT_SERVICE_CONFIG =
  '{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}';

// Whether a stopping egressd turned a fetch of `method` away before its GOAWAY reached the
// channel: refused it (UNAVAILABLE, reason SHUTTING_DOWN: nothing was sent upstream), or
// its HTTP/2 stream (REFUSED_STREAM: the server never saw it; grpc-js retries that once
// itself), or, for a request safe to repeat (GET, HEAD, OPTIONS, TRACE), cancelled it
// (CANCELLED: gRPC cancels calls that reach a server after its shutdown began).
function turnedAway(error, method) {
  if (error.code === 'CANCELLED') return ['', 'GET', 'HEAD', 'OPTIONS', 'TRACE'].includes(method);
  return error.code === 'UNAVAILABLE' &&
    (error.reason === 'SHUTTING_DOWN' || error.details === 'Stream refused by server');
}

function toMetadata(pairs) {
  const metadata = new grpc.Metadata();
  for (const [key, value] of pairs) metadata.add(key, value);
  return metadata;
}

// tls, adminTls: TLS to the Egress and the admin listener (see channel()); adminToken:
// sent as "authorization: Bearer ..." on admin calls only (egressd's --admin_token_file);
// metadata: [key, value] pairs sent on every fetch, e.g. the caller identity in egressd's
// policy.caller_header. channelOptions: gRPC channel options of the Egress channel;
// unless they set 'grpc.service_config', calls go round robin (DEFAULT_SERVICE_CONFIG) over every
// address `target` resolves to: 'dns:///egressd-headless.egress.svc.cluster.local:50051'
// (a headless Service) is one address per ready replica. The admin channel calls one
// egressd. shutdownRetries: how many times a fetch that a stopping egressd turned away is
// sent again, to the next replica, within the same timeout (see turnedAway).
class EgressClient {
  constructor({ target = '127.0.0.1:50051', adminTarget = '127.0.0.1:50052',
                timeoutMs = 30000, tls, adminTls, adminToken, metadata = [],
                channelOptions = {}, shutdownRetries = 3 } = {}) {
    const egress = channel(tls, channelOptions, true);
    const admin = channel(adminTls);
    this.shutdownRetries = shutdownRetries;
    this.egress = new v1.Egress(target, egress.credentials, egress.options);
    this.admin = new v1.TransportAdmin(adminTarget, admin.credentials, admin.options);
    this.timeoutMs = timeoutMs;
    this.metadata = metadata;
    this.adminMetadata = adminToken ? [['authorization', `Bearer ${adminToken}`]] : [];
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
    const deadline = Date.now() + (timeoutMs || this.timeoutMs);
    let raw;
    for (let attempt = 0; ; ++attempt) {
      try {
        raw = await this.call(this.egress, 'Fetch', request, Math.max(deadline - Date.now(), 1),
                              this.metadata);
        break;
      } catch (error) {
        // The first retry goes at once (round_robin hands it to the next replica); later
        // ones give the refusing egressd's GOAWAY a moment to arrive.
        const pause = 10 * attempt;
        if (!turnedAway(error, method) || attempt >= this.shutdownRetries ||
            Date.now() + pause >= deadline) {
          throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
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

  getConfig() { return this.adminCall('GetConfig', {}); }
  updateConfig(config) { return this.adminCall('UpdateConfig', { config }); }
  poolStats() { return this.adminCall('GetPoolStats', {}); }

  close() {
    this.egress.close();
    this.admin.close();
  }

  adminCall(method, request) {
    return this.call(this.admin, method, request, undefined, this.adminMetadata);
  }

  call(stub, method, request, timeoutMs, metadata = []) {
    const deadline = new Date(Date.now() + (timeoutMs || this.timeoutMs));
    return new Promise((resolve, reject) => {
      stub[method](request, toMetadata(metadata), { deadline }, (error, response) => {
        if (error) reject(new EgressError(error));
        else resolve(response);
      });
    });
  }
}

module.exports = { EgressClient, EgressError, DEFAULT_SERVICE_CONFIG };
