// Validates rendered Kubernetes manifests offline: every object against the schemas of
// npm kubernetes-models (and @kubernetes-models/prometheus-operator), with unknown field
// names reported too (the schemas let them through), plus what egressd's deployment must
// keep. Writes each egressd ConfigMap's config to CONFIG_DIR for egressd --check_config.
//
//   node validate.mjs NODE_MODULES RULES_FILE CONFIG_DIR MANIFESTS.yaml[=CIDR,...]...
//
// The CIDRs after a manifest file are the cluster's pod and service ranges its
// NetworkPolicy must keep egressd from reaching, besides the private ones every
// rendering must except.
// The packages are ES modules under NODE_MODULES (tools/install_deps.sh puts them in
// /opt/egress-npm), imported by path: ES modules do not look at NODE_PATH.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [nodeModules, rulesFile, configDir, ...manifestFiles] = process.argv.slice(2);
const YAML = createRequire(path.join(nodeModules, 'noop.js'))('yaml');
// What the models' validate() runs: the schema, and its errors as readable messages.
const { runValidateFunc } = await import(
  pathToFileURL(path.join(nodeModules, '@kubernetes-models/validate/dist/index.js')));
const problems = [];
const problem = (where, what) => problems.push(`${where}: ${what}`);

// The file of the kubernetes-models class for an object's kind.
function modelFile(apiVersion, kind) {
  const models = apiVersion.startsWith('monitoring.coreos.com/')
    ? '@kubernetes-models/prometheus-operator' : 'kubernetes-models';
  return path.join(nodeModules, models, apiVersion, `${kind}.js`);
}

// Wraps `value` so that the validator's reads are recorded: an object whose known
// properties the validator looked up, but not all of its own keys, has unknown fields.
function tracked(value, reads) {
  if (value === null || typeof value !== 'object') return value;
  const record = { keys: new Set(), enumerated: false };
  reads.set(value, record);
  const children = new Map();
  return new Proxy(value, {
    get(target, key) {
      if (typeof key === 'string') record.keys.add(key);
      const child = target[key];
      if (child === null || typeof child !== 'object') return child;
      if (!children.has(key)) children.set(key, tracked(child, reads));
      return children.get(key);
    },
    has(target, key) {
      if (typeof key === 'string') record.keys.add(key);
      return key in target;
    },
    ownKeys(target) {
      record.enumerated = true;  // a map (labels, data): any key is allowed
      return Reflect.ownKeys(target);
    },
  });
}

function unknownFields(value, reads, where) {
  if (value === null || typeof value !== 'object') return;
  const record = reads.get(value);
  for (const [key, child] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${where}[${key}]` : `${where}.${key}`;
    if (record && !Array.isArray(value) && !record.enumerated && record.keys.size > 0 &&
        !record.keys.has(key)) {
      problem(at, 'unknown field');
    }
    unknownFields(child, reads, at);
  }
}

// The schema a kind's kubernetes-models class validates with, called once on a copy that
// records which fields it reads.
async function validate(object, where) {
  const file = modelFile(object.apiVersion, object.kind);
  if (!fs.existsSync(file)) return problem(where, `no schema for ${object.apiVersion} ${object.kind}`);
  const schema = /from"((?:\.\.\/)+_schemas\/[^"]+)"/.exec(fs.readFileSync(file, 'utf8'))[1];
  const { validate: check } = await import(pathToFileURL(path.resolve(path.dirname(file), schema)));
  const reads = new Map();
  try {
    runValidateFunc(check, tracked(object, reads));
  } catch (error) {
    return problem(where, error.message);
  }
  unknownFields(object, reads, where);
}

// JSON with every object's keys sorted: kustomize reorders them.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
}

// What the deployment must keep, whatever else changes.
function checkEgressd(objects) {
  const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const deployment = find('Deployment', 'egressd');
  if (!deployment) return problem('egressd', 'no Deployment');
  const pod = deployment.spec.template.spec;
  const container = pod.containers.find((c) => c.name === 'egressd');
  const grace = container.args.find((a) => a.startsWith('--shutdown_grace='));
  const graceSeconds = grace ? parseInt(grace.split('=')[1], 10) : 10;
  // preStop's wait (the pod leaves the endpoints while egressd still serves) comes first.
  const preStop = container.lifecycle?.preStop?.exec?.command || [];
  const preStopSeconds = preStop[0] === 'sleep' ? parseInt(preStop[1], 10) : 0;
  if (!(preStopSeconds > 0)) problem('egressd container', 'no preStop sleep before SIGTERM');
  if (!(pod.terminationGracePeriodSeconds > preStopSeconds + graceSeconds)) {
    problem('Deployment egressd', `terminationGracePeriodSeconds must exceed preStop (${preStopSeconds} s) + --shutdown_grace (${graceSeconds} s)`);
  }
  // Readiness asks egressd's health as a whole, which turns NOT_SERVING at SIGTERM.
  const readiness = container.readinessProbe?.grpc;
  if (readiness && (readiness.port !== 50051 || (readiness.service || '') !== '')) {
    problem('egressd container', 'readinessProbe must ask the gRPC port\'s overall health (service "")');
  }
  if (pod.securityContext?.runAsNonRoot !== true) problem('Deployment egressd', 'not runAsNonRoot');
  const security = container.securityContext || {};
  if (security.readOnlyRootFilesystem !== true) problem('egressd container', 'root filesystem writable');
  if (security.allowPrivilegeEscalation !== false) problem('egressd container', 'privilege escalation allowed');
  if (!(security.capabilities?.drop || []).includes('ALL')) problem('egressd container', 'capabilities not dropped');
  for (const probe of ['livenessProbe', 'readinessProbe']) {
    if (!container[probe]?.grpc) problem('egressd container', `${probe} is not a gRPC probe`);
  }
  if (!container.resources?.requests || !container.resources?.limits) {
    problem('egressd container', 'no resource requests and limits');
  }
  if (!pod.topologySpreadConstraints && !pod.affinity?.podAntiAffinity) {
    problem('Deployment egressd', 'no spread across nodes');
  }
  const service = find('Service', 'egressd');
  if (!service || service.spec.ports.some((p) => p.port === 50052 || p.targetPort === 50052)) {
    problem('Service egressd', 'must expose the gRPC port and not the admin port');
  }
  // Client-side balancing: one DNS address per ready pod, on the gRPC port only.
  const headless = find('Service', 'egressd-headless');
  if (!headless || headless.spec.clusterIP !== 'None' || headless.spec.publishNotReadyAddresses ||
      canonical(headless.spec.selector) !== canonical(deployment.spec.selector.matchLabels) ||
      headless.spec.ports.length !== 1 || headless.spec.ports[0].port !== 50051) {
    problem('Service egressd-headless', 'must be headless (clusterIP: None), select the egressd pods, ready ones only, and expose the gRPC port alone');
  }
  const dashboard = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.labels?.grafana_dashboard === '1');
  if (!dashboard) problem('egressd', 'no Grafana dashboard ConfigMap labelled grafana_dashboard: "1"');
  const rules = find('PrometheusRule', 'egressd');
  const expected = YAML.parse(fs.readFileSync(rulesFile, 'utf8')).groups;
  if (!rules || canonical(rules.spec.groups) !== canonical(expected)) {
    problem('PrometheusRule egressd', `its groups differ from ${path.basename(rulesFile)}`);
  }
  const mounted = pod.volumes.find((v) => v.name === 'config')?.configMap?.name;
  const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === mounted);
  if (!config?.data?.['egress.textproto']) {
    return problem('Deployment egressd', 'the mounted ConfigMap has no egress.textproto');
  }
  return config.data['egress.textproto'];
}

// An IPv4 or IPv6 CIDR as its address bits and prefix length.
function parseCidr(cidr) {
  const [address, bits] = cidr.split('/');
  const prefix = Number(bits);
  if (!address.includes(':')) {
    const value = address.split('.').reduce((v, octet) => (v << 8n) | BigInt(Number(octet)), 0n);
    return { v6: false, width: 32, value, prefix };
  }
  const [head, tail] = address.split('::');
  const groups = (part) => (part ? part.split(':') : []);
  const missing = tail === undefined ? 0 : 8 - groups(head).length - groups(tail).length;
  const all = [...groups(head), ...Array(missing).fill('0'), ...groups(tail ?? '')];
  const value = all.reduce((v, group) => (v << 16n) | BigInt(parseInt(group, 16)), 0n);
  return { v6: true, width: 128, value, prefix };
}

// Whether every address of `inner` is in `outer`.
function covers(outer, inner) {
  if (outer.v6 !== inner.v6 || inner.prefix < outer.prefix) return false;
  const shift = BigInt(outer.width - outer.prefix);
  return (outer.value >> shift) === (inner.value >> shift);
}

// Ranges egressd must never reach past its NetworkPolicy: private, shared (CGNAT),
// link-local, loopback, unique local, and NAT64 (which reaches private IPv4 too).
const kPrivateRanges = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10',
  '169.254.0.0/16', '127.0.0.0/8', 'fc00::/7', 'fe80::/10', '::1/128', '64:ff9b::/96',
  '64:ff9b:1::/48'];

// Ingress by namespace and pod together; egress to `clusterRanges` and the private
// ranges excepted from every ipBlock that would let it through.
function checkNetworkPolicy(objects, clusterRanges, where) {
  const policy = objects.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'egressd');
  if (!policy) return problem(where, 'no NetworkPolicy egressd');
  const selects = (selector) =>
    Object.keys(selector?.matchLabels || {}).length > 0 || (selector?.matchExpressions || []).length > 0;
  (policy.spec.ingress || []).forEach((rule, i) => {
    if (!rule.from?.length) problem(`${where} ingress[${i}]`, 'lets in every source');
    (rule.from || []).forEach((peer, j) => {
      if (!selects(peer.namespaceSelector) || !selects(peer.podSelector)) {
        problem(`${where} ingress[${i}].from[${j}]`,
          'must select by namespace and pod together (namespaceSelector and podSelector with labels)');
      }
    });
  });
  const blocks = (policy.spec.egress || []).flatMap((rule) => rule.to || [])
    .filter((peer) => peer.ipBlock).map((peer) => peer.ipBlock);
  for (const block of blocks) {
    const cidr = parseCidr(block.cidr);
    for (const except of block.except || []) {
      if (!covers(cidr, parseCidr(except))) problem(where, `except ${except} is not within ${block.cidr}`);
    }
  }
  for (const range of [...kPrivateRanges, ...clusterRanges]) {
    const r = parseCidr(range);
    for (const block of blocks) {
      const cidr = parseCidr(block.cidr);
      if (!covers(cidr, r) && !covers(r, cidr)) continue;
      if (!(block.except || []).some((e) => covers(parseCidr(e), r))) {
        problem(where, `egress to ${range} is allowed by ipBlock ${block.cidr}`);
      }
    }
  }
}

let configs = 0;
for (const argument of manifestFiles) {
  const [file, ranges] = argument.split('=');
  const clusterRanges = ranges ? ranges.split(',') : [];
  const objects = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8')).map((d) => d.toJS());
  for (const object of objects) {
    await validate(object, `${path.basename(file)}: ${object.kind} ${object.metadata?.name}`);
  }
  checkNetworkPolicy(objects, clusterRanges, path.basename(file));
  const config = checkEgressd(objects);
  if (config) fs.writeFileSync(path.join(configDir, `${path.basename(file)}.textproto`), config);
  configs += config ? 1 : 0;
  console.log(`${file}: ${objects.length} objects`);
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`all valid; ${configs} egressd configs written to ${configDir}`);
