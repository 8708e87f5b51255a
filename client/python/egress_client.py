"""A small Python client for egressd over its generated gRPC stubs.

The stubs are generated from proto/egress/v1/egress.proto and proto/google/rpc
(client/python/generate.sh); put the directory holding them on sys.path (or
PYTHONPATH) before importing this module.

    from egress_client import EgressClient, EgressError
    with EgressClient("127.0.0.1:50051") as egress:
        response = egress.fetch("https://api.example.com/v1/items", head_only=True)
        print(response.status_code, response.reused)

Against an egressd that serves TLS and guards its admin service with mTLS and a token:

    egress = EgressClient("egressd:50051", "egressd:50052",
                          tls=Tls(ca_file="ca.pem"),
                          admin_tls=Tls(ca_file="ca.pem", cert_file="me.pem", key_file="me.key"),
                          admin_token=open("admin.token").read().strip(),
                          metadata=[("x-egress-caller", "billing")])
"""

import dataclasses
import time

import grpc
from egress.v1 import egress_pb2, egress_pb2_grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2


class EgressError(Exception):
    """egressd could not give an HTTP answer: `code` is the grpc.StatusCode
    (INVALID_ARGUMENT, PERMISSION_DENIED, UNAVAILABLE, DEADLINE_EXCEEDED,
    RESOURCE_EXHAUSTED, ...), `message` egressd's words.

    Why, when egressd said so (google.rpc.ErrorInfo): `reason`, a stable name such as
    "POLICY_DENIED", "INVALID_URL" or "CONCURRENCY_LIMIT"; `domain`, "egress.v1";
    `metadata`, a dict (for POLICY_DENIED: "rule", "host", "origin" and, when an address
    rule decided, "address"). Without it (e.g. an error gRPC itself made) reason and
    domain are None and metadata is empty. `retry_delay`: the seconds egressd asks the
    caller to wait before a retry (google.rpc.RetryInfo), or None."""

    def __init__(self, code, message, error_info=None, retry_info=None):
        reason = error_info.reason if error_info else None
        super().__init__(f"{code.name}: {message}" + (f" [{reason}]" if reason else ""))
        self.code = code
        self.message = message
        self.reason = reason
        self.domain = error_info.domain if error_info else None
        self.metadata = dict(error_info.metadata) if error_info else {}
        self.retry_delay = retry_info.retry_delay.ToNanoseconds() / 1e9 if retry_info else None

    @classmethod
    def from_rpc_error(cls, error):
        """The EgressError of a grpc.RpcError, with the ErrorInfo and RetryInfo of the
        google.rpc.Status in its grpc-status-details-bin trailer."""
        trailer = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
        try:
            status = status_pb2.Status.FromString(trailer)
        except DecodeError:  # details left out: the code and the message still say what happened
            status = status_pb2.Status()
        details = {}
        for detail in status.details:
            for kind in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo):
                if detail.Is(kind.DESCRIPTOR):
                    details[kind] = kind()
                    detail.Unpack(details[kind])
        return cls(error.code(), error.details(), details.get(error_details_pb2.ErrorInfo),
                   details.get(error_details_pb2.RetryInfo))


@dataclasses.dataclass
class Response:
    status_code: int
    headers: list  # [(name, value)], in the order received
    body: bytes
    body_truncated: bool
    reused: bool  # the upstream connection had carried an earlier request
    connection_id: int
    raw: egress_pb2.FetchResponse  # everything else: timing, remote address, idle time

    def header(self, name):
        """The first value of header `name` (case-insensitive), or None. A value that is
        not UTF-8 comes as its bytes read as ISO-8859-1: one character per byte."""
        value = self.header_bytes(name)
        return None if value is None else self._text(value)

    def header_bytes(self, name):
        """The first value of header `name` (case-insensitive) exactly as the upstream
        sent it, as bytes, or None."""
        return next((h.value_bytes or h.value.encode() for h in self.raw.headers
                     if h.name.lower() == name.lower()), None)

    @staticmethod
    def _text(value):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.decode("latin-1")


@dataclasses.dataclass
class Tls:
    """TLS to one of egressd's listeners (--grpc_tls_* or --admin_tls_*). ca_file: PEM
    roots egressd's certificate must chain to (None: the system's); cert_file and
    key_file: a client certificate for mTLS; server_name: the name egressd's certificate
    carries when it is not the target's host."""
    ca_file: str = None
    cert_file: str = None
    key_file: str = None
    server_name: str = None


def _read(path):
    if path is None:
        return None
    with open(path, "rb") as file:
        return file.read()


# Any size of response: egressd bounds bodies itself (max_body_bytes, at most
# limits.max_body_bytes_ceiling); gRPC's default of 4 MiB would refuse a FULL body a
# caller asks for with a max_body_bytes over egressd's default (4 MiB - 256 KiB).
_UNLIMITED_RECEIVE = [("grpc.max_receive_message_length", -1)]

# The service config every client of egressd defaults to: calls round robin over every
# address the target resolves to (gRPC's own default, pick_first, sends them all to one),
# and client-side health checking, which takes a replica out of the rotation as soon as
# its health turns NOT_SERVING (egressd's first step at SIGTERM), before its GOAWAY.
DEFAULT_SERVICE_CONFIG = ('{"loadBalancingConfig":[{"round_robin":{}}],'
                          '"healthCheckConfig":{"serviceName":""}}')


def _channel(target, tls, extra=(), balance=False):
    options = list(extra)
    names = {name for name, _ in options}
    if "grpc.max_receive_message_length" not in names:
        options += _UNLIMITED_RECEIVE
    if balance and not names & {"grpc.service_config", "grpc.lb_policy_name"}:
        options.append(("grpc.service_config", DEFAULT_SERVICE_CONFIG))
    if tls is None:
        return grpc.insecure_channel(target, options)
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ValueError("Tls: cert_file and key_file go together")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file), private_key=_read(tls.key_file),
        certificate_chain=_read(tls.cert_file))
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.secure_channel(target, credentials, options)


def _turned_away(error, method):
    """Whether a stopping egressd turned the fetch away before its GOAWAY reached the
    channel: refused it, or (a call that arrived once gRPC's shutdown had begun) cancelled
    it, which only a request safe to repeat survives."""
    if error.code == grpc.StatusCode.CANCELLED:
        return method in ("", "GET", "HEAD", "OPTIONS", "TRACE")
    return error.code == grpc.StatusCode.UNAVAILABLE and error.reason == "SHUTTING_DOWN"


class EgressClient:
    """Fetch and the admin calls; every call has a deadline (`timeout` seconds).
    tls, admin_tls: Tls for the Egress and the admin listener (None: plaintext);
    admin_token: sent as "authorization: Bearer ..." on admin calls only (egressd's
    --admin_token_file); metadata: (key, value) pairs sent on every fetch, e.g. the
    caller identity in egressd's policy.caller_header.
    options: gRPC channel options of the Egress channel, (name, value) pairs; unless they
    set "grpc.service_config" or "grpc.lb_policy_name", calls go round robin
    (DEFAULT_SERVICE_CONFIG) over every address `target` resolves to, skipping a replica
    whose health is NOT_SERVING: "dns:///egressd-headless.egress.svc.cluster.local:50051"
    (a headless Service) is one address per ready replica. The admin channel calls one
    egressd (the first address of admin_target).
    shutdown_retries: how many times a fetch that a stopping egressd turned away is sent
    again, to the next replica, within the same timeout: refused (UNAVAILABLE, reason
    SHUTTING_DOWN: nothing was sent upstream) or, for a GET, HEAD, OPTIONS or TRACE (safe
    to repeat), cancelled (CANCELLED: gRPC cancels calls that reach a server after its
    shutdown began)."""

    def __init__(self, target="127.0.0.1:50051", admin_target="127.0.0.1:50052",
                 timeout=30.0, *, tls=None, admin_tls=None, admin_token=None, metadata=(),
                 options=(), shutdown_retries=3):
        self._channel = _channel(target, tls, options, balance=True)
        self._admin_channel = _channel(admin_target, admin_tls)
        self._shutdown_retries = max(0, shutdown_retries)
        self._egress = egress_pb2_grpc.EgressStub(self._channel)
        self._admin = egress_pb2_grpc.TransportAdminStub(self._admin_channel)
        self._timeout = timeout
        self._metadata = tuple(metadata)
        self._admin_metadata = (("authorization", f"Bearer {admin_token}"),) if admin_token else ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._channel.close()
        self._admin_channel.close()

    def fetch(self, url, *, method="", headers=(), body=b"", head_only=False, prefix=None,
              max_body_bytes=0, timeout=None, follow_redirects=False):
        """One HTTP request through egressd. headers: (name, value) pairs, a value
        str or (sent byte for byte) bytes. head_only: status and headers (egressd
        drains the body); prefix=N: the first N bytes. An HTTP error status is a
        Response; EgressError when there is no HTTP answer."""
        request = egress_pb2.FetchRequest(
            url=url, method=method, body=body, follow_redirects=follow_redirects,
            headers=[egress_pb2.Header(name=n, value_bytes=v) if isinstance(v, bytes)
                     else egress_pb2.Header(name=n, value=v) for n, v in headers])
        if head_only:
            request.body_mode = egress_pb2.BODY_MODE_NONE
        elif prefix is not None:
            request.body_mode = egress_pb2.BODY_MODE_PREFIX
            request.max_body_bytes = prefix
        else:
            request.body_mode = egress_pb2.BODY_MODE_FULL
            request.max_body_bytes = max_body_bytes
        deadline = time.monotonic() + (timeout or self._timeout)
        for attempt in range(self._shutdown_retries + 1):
            try:
                raw = self._call(self._egress.Fetch, request,
                                 max(deadline - time.monotonic(), 0.001), self._metadata)
                break
            except EgressError as error:
                # The first retry goes at once (round_robin hands it to the next replica);
                # later ones give the refusing egressd's GOAWAY a moment to arrive.
                pause = 0.01 * attempt
                if (not _turned_away(error, method) or attempt == self._shutdown_retries
                        or time.monotonic() + pause >= deadline):
                    raise
                time.sleep(pause)
        return Response(
            status_code=raw.status_code,
            headers=[(h.name, h.value) for h in raw.headers],
            body=raw.body,
            body_truncated=raw.body_truncated,
            reused=raw.connection.reused,
            connection_id=raw.connection.connection_id,
            raw=raw)

    def get_config(self):
        return self._admin_call(self._admin.GetConfig, egress_pb2.GetConfigRequest())

    def update_config(self, config):
        """Swaps in `config` (an egress_pb2.Config) whole; returns the config in force."""
        return self._admin_call(self._admin.UpdateConfig,
                                egress_pb2.UpdateConfigRequest(config=config))

    def pool_stats(self):
        return self._admin_call(self._admin.GetPoolStats, egress_pb2.GetPoolStatsRequest())

    def _admin_call(self, method, request):
        return self._call(method, request, metadata=self._admin_metadata)

    def _call(self, method, request, timeout=None, metadata=()):
        try:
            return method(request, timeout=timeout or self._timeout, metadata=metadata)
        except grpc.RpcError as error:
            raise EgressError.from_rpc_error(error) from None
