"""Overhead, throughput and memory on loopback (bench/run.py, issue 6 parts 3 and 4;
issue 15 part 3).

h2load drives unary Fetch calls through egressd to an nginx upstream serving 1 KiB, and,
in the same run, the same load against the upstream directly (h2load --h1), against nginx
configured as a reverse-proxy egress gateway (h2c in front, HTTP/1.1 keep-alive behind),
and against the gRPC ceiling (bench/grpc_ceiling.cc); the same over HTTPS to the upstream
(egressd and the gateway, pooled); and 1 MiB bodies through FetchStream and through the
gateway. Everything runs on the loopback of one network namespace made for the run.
"""

import os
import subprocess
import threading

from nginx import start_nginx
from wan import readable_tempdir

UPSTREAM_PORT = 8080
UPSTREAM_TLS_PORT = 8444
GATEWAY_PORT = 8081
GATEWAY_TLS_PORT = 8082
# The gateway with TLS callers (h2 over TLS in front, HTTP/1.1 keep-alive behind).
GATEWAY_CALLERS_TLS_PORT = 8083
EGRESSD_GRPC = "127.0.0.1:50051"
EGRESSD_METRICS = "127.0.0.1:9464"
# Three more egressd, started alike and measured one after the other, their access log
# to a file, off, or to a pipe nobody reads: system: (gRPC, admin, metrics address)
OTHER_EGRESSD = {"egressd-log-on": ("127.0.0.1:50091", "127.0.0.1:50092", "127.0.0.1:9491"),
                 "egressd-log-off": ("127.0.0.1:50071", "127.0.0.1:50072", "127.0.0.1:9471"),
                 "egressd-log-blocked": ("127.0.0.1:50081", "127.0.0.1:50082", "127.0.0.1:9481")}
CEILING_GRPC = "127.0.0.1:50061"
FETCH_PATH = "/egress.v1.Egress/Fetch"
FETCH_STREAM_PATH = "/egress.v1.Egress/FetchStream"
LARGE_BYTES = 1024 * 1024

# (label, h2load connections, streams per connection)
SHAPES = [("1 connection", 1, 1), ("16 connections", 16, 1), ("64 connections", 64, 1),
          ("1 connection, 64 streams", 1, 64)]

SYSTEMS = [
    ("egressd", "egressd (gRPC Fetch → HTTP/1.1 upstream)"),
    ("direct", "upstream directly (`h2load --h1`; 64 streams = pipelining)"),
    ("gateway", "nginx reverse-proxy gateway (h2c → HTTP/1.1 keep-alive)"),
    ("ceiling", "gRPC ceiling (fixed 1 KiB answer, no I/O)"),
    ("egressd-tls", "egressd (gRPC Fetch → HTTPS upstream, pooled)"),
    ("gateway-tls", "nginx gateway (h2c → HTTPS keep-alive upstream)"),
]

# The access log on (to a file, as in every other egressd row), off, and blocked, at one
# shape.
ACCESS_LOG_SHAPE = ("16 connections", 16, 1)
ACCESS_LOG_SYSTEMS = [
    ("egressd-log-on", "egressd, access log on (to a file)"),
    ("egressd-log-off", "egressd, `--access_log=off`"),
    ("egressd-log-blocked", "egressd, access log to a pipe nobody reads"),
]

# 1 MiB per request: FetchStream through egressd against the gateway, at one shape.
LARGE_SHAPE = ("16 connections", 16, 1)
LARGE_SYSTEMS = [
    ("egressd-1m", "egressd (gRPC FetchStream, 1 MiB from the HTTP/1.1 upstream)"),
    ("gateway-1m", "nginx gateway (1 MiB, h2c → HTTP/1.1 keep-alive)"),
]


class Loopback:
    """The servers of the loopback benchmark, started in namespace ns of wan."""

    def __init__(self, wan, ns, tools, work, variants=None):
        """variants: more egressd to measure beside the others (bench/ab.py), by name:
        (binary, extra flags); each with its access log off unless its flags set one."""
        self.wan, self.ns, self.tools = wan, ns, tools
        self.dir = readable_tempdir("loopback-", work)
        www = os.path.join(self.dir, "www")
        os.makedirs(www)
        with open(os.path.join(www, "1k"), "wb") as out:
            out.write(b"x" * 1024)
        with open(os.path.join(www, "1m"), "wb") as out:
            out.write(b"m" * LARGE_BYTES)
        self.pki = os.path.dirname(tools.ca)  # its server certificate names 127.0.0.1 too
        self.upstream = self._nginx("upstream", UPSTREAM_HTTP, UPSTREAM_PORT, workers="1")
        self.gateway = self._nginx("gateway", GATEWAY_HTTP, GATEWAY_PORT, workers="auto")
        config = os.path.join(self.dir, "egressd.textproto")
        with open(config, "w") as out:
            out.write(EGRESSD_CONFIG.replace("{ca}", tools.ca))
        self.egressd = wan.spawn(ns, [tools.egressd, f"--config={config}",
                                      f"--grpc_listen={EGRESSD_GRPC}",
                                      f"--metrics_listen={EGRESSD_METRICS}",
                                      f"--access_log={os.path.join(self.dir, 'access.log')}"],
                                 stderr=subprocess.DEVNULL)
        # A FIFO open for reading that is never read: once its 64 KiB fill, the log blocks.
        fifo = os.path.join(self.dir, "access.fifo")
        os.mkfifo(fifo)
        self.fifo_reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.others = {}
        # The gRPC, admin and metrics addresses of every other egressd, by name.
        self.addresses = dict(OTHER_EGRESSD)
        for system, (grpc, admin, metrics) in OTHER_EGRESSD.items():
            sink = {"egressd-log-on": os.path.join(self.dir, f"{system}.log"),
                    "egressd-log-off": "off"}.get(system, fifo)
            self.others[system] = wan.spawn(ns, [
                tools.egressd, f"--config={config}", f"--grpc_listen={grpc}",
                f"--admin_listen={admin}", f"--metrics_listen={metrics}", f"--access_log={sink}"],
                stderr=subprocess.DEVNULL)
        # Systems whose callers speak TLS: the variants served with --grpc_tls_cert.
        self.https = set()
        for i, (system, (binary, flags)) in enumerate((variants or {}).items()):
            grpc, admin, metrics = (f"127.0.0.1:{50300 + 3 * i + k}" for k in range(3))
            self.addresses[system] = (grpc, admin, metrics)
            if any(f.startswith("--grpc_tls_cert") for f in flags):
                self.https.add(system)
            log = [] if any(f.startswith("--access_log") for f in flags) else ["--access_log=off"]
            # Kept: a floor (bench/loop_server_floor) says there what status its answers had.
            with open(os.path.join(self.dir, f"variant-{i}.stderr"), "wb") as stderr:
                self.others[system] = wan.spawn(ns, [
                    binary, f"--config={config}", f"--grpc_listen={grpc}",
                    f"--admin_listen={admin}", f"--metrics_listen={metrics}", *log, *flags],
                    stderr=stderr)
        self.ceiling = wan.spawn(ns, [tools.grpc_ceiling, f"--listen={CEILING_GRPC}"])
        for address in [EGRESSD_GRPC, CEILING_GRPC] + [a[0] for a in self.addresses.values()]:
            host, port = address.split(":")
            wan.wait_for_port(ns, host, int(port))
        self.fetch_frame = self._grpc_frame("/1k")
        self.fetch_frame_tls = self._grpc_frame("/1k", tls=True)
        self.fetch_frame_1m = self._grpc_frame("/1m")
        # h2load counts a gRPC call whose answer carries an HTTP 404 as a success: make
        # sure the upstream serves what egressd is measured on.
        if len(http_get(wan, ns, f"http://127.0.0.1:{UPSTREAM_PORT}/1k")) != 1024 + 1:
            raise RuntimeError("the upstream nginx does not serve /1k")

    def _nginx(self, name, template, port, workers):
        prefix = os.path.join(self.dir, name)
        os.makedirs(prefix)
        values = {"www": os.path.join(self.dir, "www"), "port": port, "upstream": UPSTREAM_PORT,
                  "tls_port": UPSTREAM_TLS_PORT, "gateway_tls_port": GATEWAY_TLS_PORT,
                  "gateway_callers_tls_port": GATEWAY_CALLERS_TLS_PORT,
                  "pki": self.pki}
        for key, value in values.items():
            template = template.replace("{" + key + "}", str(value))
        return start_nginx(self.wan, self.ns, prefix, template, "127.0.0.1", port, workers)

    def _grpc_frame(self, path, tls=False):
        """The Fetch frame for path on the upstream (HTTPS if tls)."""
        origin = (f"https://127.0.0.1:{UPSTREAM_TLS_PORT}" if tls
                  else f"http://127.0.0.1:{UPSTREAM_PORT}")
        return grpc_frame(self.dir, origin + path,
                          "fetch" + ("-tls" if tls else "") + path.replace("/", "-"))

    def server_pids(self, system):
        """Every process that serves requests for system (nginx masters and workers)."""
        upstream = nginx_pids(self.upstream.pid)
        if system in self.others:
            return [self.others[system].pid] + upstream
        egressd = [self.egressd.pid] + upstream
        gateway = nginx_pids(self.gateway.pid) + upstream
        return {"egressd": egressd, "egressd-tls": egressd, "egressd-1m": egressd,
                "direct": upstream,
                "gateway": gateway, "gateway-tls": gateway, "gateway-1m": gateway,
                "gateway-callers-tls": gateway,
                "ceiling": [self.ceiling.pid]}[system]

    def h2load(self, system, connections, streams, seconds, call=None):
        """One h2load run: returns requests/s, p50 and p99 ms, server CPU s per 10k.
        call: for an egressd of variants, (gRPC method path, request frame, whether each
        call must end OK) instead of a 1 KiB Fetch that must."""
        log = os.path.join(self.dir, f"h2load-{system}-{connections}x{streams}.log")
        if os.path.exists(log):
            os.remove(log)  # h2load appends
        argv = ["h2load", f"--duration={seconds}", f"-c{connections}", f"-m{streams}",
                f"--log-file={log}"]
        grpc = {"egressd": (EGRESSD_GRPC, self.fetch_frame, FETCH_PATH),
                "egressd-tls": (EGRESSD_GRPC, self.fetch_frame_tls, FETCH_PATH),
                "egressd-1m": (EGRESSD_GRPC, self.fetch_frame_1m, FETCH_STREAM_PATH),
                "ceiling": (CEILING_GRPC, self.fetch_frame, FETCH_PATH)}
        method, frame, must_be_ok = call or (FETCH_PATH, self.fetch_frame, True)
        for other, (address, _, _) in self.addresses.items():
            grpc[other] = (address, frame, method)
        if system == "direct":
            argv += ["--h1", f"http://127.0.0.1:{UPSTREAM_PORT}/1k"]
        elif system == "gateway":
            argv += [f"http://127.0.0.1:{GATEWAY_PORT}/1k"]
        elif system == "gateway-tls":
            argv += [f"http://127.0.0.1:{GATEWAY_TLS_PORT}/1k"]
        elif system == "gateway-callers-tls":
            argv += [f"https://127.0.0.1:{GATEWAY_CALLERS_TLS_PORT}/1k"]
        elif system == "gateway-1m":
            argv += [f"http://127.0.0.1:{GATEWAY_PORT}/1m"]
        else:
            address, frame, method = grpc[system]
            scheme = "https" if system in self.https else "http"
            argv += ["-d", frame, "-H", "content-type: application/grpc",
                     "-H", "te: trailers", f"{scheme}://{address}{method}"]
        pids = self.server_pids(system)
        metrics = self.addresses[system][2] if system in self.addresses else EGRESSD_METRICS
        is_egressd = system.startswith("egressd")
        fetches_ok = self.egressd_fetches_ok(metrics) if is_egressd else None
        dropped = self.log_lines_dropped(metrics) if is_egressd else None
        rss = RssSampler(pids[0])
        cpu_before = cpu_seconds(pids)
        with rss:
            output = self.wan.run(self.ns, argv, stdout=subprocess.PIPE, text=True,
                                  check=True).stdout
        cpu = cpu_seconds(pids) - cpu_before
        latencies = read_latencies_ms(log)
        succeeded = h2load_succeeded(output)
        if not latencies or succeeded != len(latencies):
            raise RuntimeError(f"h2load {system}: {succeeded} succeeded of "
                               f"{len(latencies)}\n{output}")
        if fetches_ok is not None and must_be_ok:
            # h2load counts HTTP 200 as success whatever the grpc-status: egressd's own
            # counter says whether each call was an OK Fetch.
            ok = self.egressd_fetches_ok(metrics) - fetches_ok
            if ok < succeeded:
                raise RuntimeError(f"egressd answered {ok} OK of {succeeded} calls")
        result = {"rps": succeeded / seconds,
                  "p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
                  "cpu_per_10k": cpu / succeeded * 10000, "egressd_rss_max": rss.max}
        if is_egressd:
            result["log_dropped"] = self.log_lines_dropped(metrics) - dropped
        return result

    def pool_of_idle_connections(self, connections, tls=False):
        """Makes `connections` fetches at once of a path the upstream answers after 1 s
        (over HTTPS if tls), so that egressd opens that many connections, which then wait
        idle in its pool. Returns how many are idle, of all origins."""
        frame = self._grpc_frame("/slow", tls)
        self.wan.run(self.ns, ["h2load", f"-n{connections}", "-c10",
                               f"-m{connections // 10}", "-d", frame,
                               "-H", "content-type: application/grpc", "-H", "te: trailers",
                               f"http://{EGRESSD_GRPC}{FETCH_PATH}"],
                     stdout=subprocess.DEVNULL, check=True)
        return int(metric_sum(self.wan, self.ns, EGRESSD_METRICS, "egress_pool_connections", 'state="idle"'))

    def egressd_fetches_ok(self, metrics=EGRESSD_METRICS):
        return metric_sum(self.wan, self.ns, metrics, "egress_fetches_total", 'code="OK"')

    def log_lines_dropped(self, metrics):
        return metric_sum(self.wan, self.ns, metrics, "egress_access_log_dropped_total", "")


class RssSampler:
    """The largest RSS of a process while the with-block runs, sampled every 50 ms."""

    def __init__(self, pid):
        self.pid = pid
        self.max = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        return False

    def _sample(self):
        while True:
            self.max = max(self.max, rss_mib(self.pid))
            if self._done.wait(0.05):
                return


def nginx_pids(master):
    """nginx's master and its workers."""
    pids = [master]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == master:
                        pids.append(int(entry))
            except OSError:
                pass  # the process ended while we looked
    return pids


def cpu_seconds(pids):
    """User plus system CPU seconds of pids, all their threads included."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def read_latencies_ms(log):
    """h2load's per-request log: start time, status, latency in microseconds."""
    latencies = []
    with open(log) as lines:
        for line in lines:
            fields = line.split()
            if len(fields) == 3 and fields[1] == "200":
                latencies.append(int(fields[2]) / 1000)
    return latencies


def h2load_succeeded(output):
    for line in output.splitlines():
        if line.startswith("requests:"):  # requests: N total, N started, N done, N succeeded
            return int(line.split(",")[3].split()[0])
    raise RuntimeError(f"no request count in h2load's output:\n{output}")


def grpc_frame(directory, url, name):
    """The body of a Fetch or FetchStream call as h2load sends it: a gRPC frame holding a
    FetchRequest for url, encoded by protoc from text format, in directory/name.grpc."""
    text = (f'url: "{url}"\n'
            'body_mode: BODY_MODE_FULL\n')
    message = subprocess.run(
        ["protoc", "--proto_path=proto", "--proto_path=/usr/include",
         "--encode=egress.v1.FetchRequest", "egress/v1/egress.proto"],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout
    frame = os.path.join(directory, name + ".grpc")
    with open(frame, "wb") as out:
        out.write(b"\x00" + len(message).to_bytes(4, "big") + message)
    return frame


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def http_get(wan, ns, url):
    """The body of url, fetched from namespace ns; fails unless the status is 200."""
    script = f"import urllib.request\nprint(urllib.request.urlopen('{url}').read().decode())"
    return wan.run(ns, ["/usr/bin/python3", "-c", script], stdout=subprocess.PIPE,
                   text=True, check=True).stdout


def metric_sum(wan, ns, metrics, name, label):
    """The sum of a metric's series on the /metrics at address metrics whose labels
    include label."""
    text = http_get(wan, ns, f"http://{metrics}/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") and label in line)


EGRESSD_CONFIG = """
policy { allow_cidrs: "127.0.0.0/8" }
transport { max_idle_per_origin: 2000 extra_ca_file: "{ca}" }
"""

# Inside nginx's http blocks; the rest is bench/nginx.py's.
UPSTREAM_HTTP = """
  access_log off;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:{port};
    root {www};
    location = /slow { echo_sleep 1; echo "slow"; }
  }
  server {
    listen 127.0.0.1:{tls_port} ssl;
    ssl_certificate {pki}/server.pem;
    ssl_certificate_key {pki}/server.key;
    root {www};
    location = /slow { echo_sleep 1; echo "slow"; }
  }
"""

GATEWAY_HTTP = """
  access_log off;
  upstream origin {
    server 127.0.0.1:{upstream};
    keepalive 128;
  }
  server {
    listen 127.0.0.1:{port} http2;
    http2_max_concurrent_streams 128;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
  # The same over HTTPS to the upstream, its connections and TLS sessions reused. It
  # does not verify the upstream's certificate (egressd does): on pooled connections
  # that is a per-handshake cost, not a per-request one.
  upstream origin_tls {
    server 127.0.0.1:{tls_port};
    keepalive 128;
  }
  server {
    listen 127.0.0.1:{gateway_tls_port} http2;
    http2_max_concurrent_streams 128;
    location / {
      proxy_pass https://origin_tls;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_ssl_session_reuse on;
    }
  }
  # TLS callers (h2 by ALPN), as egressd's with --grpc_tls_cert; the plain upstream.
  server {
    listen 127.0.0.1:{gateway_callers_tls_port} ssl http2;
    ssl_certificate {pki}/server.pem;
    ssl_certificate_key {pki}/server.key;
    http2_max_concurrent_streams 128;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
"""
