"""What the synchronous and the asyncio client share: the error, the response, TLS, the
channels and what a client holds (ClientBase), and the request. The stubs (egress_client.v1, egress_client._rpc) are
generated from proto/ when the package is built (stubs.py)."""

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf.message import DecodeError

from egress_client._rpc import error_details_pb2, status_pb2
from egress_client.v1 import egress_pb2, egress_pb2_grpc

Metadata = Sequence[Tuple[str, str]]
HeaderValue = Union[str, bytes]


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

    code: grpc.StatusCode
    message: str
    reason: Optional[str]
    domain: Optional[str]
    metadata: Dict[str, str]
    retry_delay: Optional[float]

    def __init__(self, code: grpc.StatusCode, message: str,
                 error_info: Optional[error_details_pb2.ErrorInfo] = None,
                 retry_info: Optional[error_details_pb2.RetryInfo] = None) -> None:
        reason = error_info.reason if error_info else None
        super().__init__(f"{code.name}: {message}" + (f" [{reason}]" if reason else ""))
        self.code = code
        self.message = message
        self.reason = reason
        self.domain = error_info.domain if error_info else None
        self.metadata = dict(error_info.metadata) if error_info else {}
        self.retry_delay = retry_info.retry_delay.ToNanoseconds() / 1e9 if retry_info else None

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "EgressError":
        """The EgressError of a grpc.RpcError (or grpc.aio.AioRpcError), with the
        ErrorInfo and RetryInfo of the google.rpc.Status in its grpc-status-details-bin
        trailer."""
        # (key, value) pairs in both; grpc.aio's Metadata is no dict of them.
        trailer = next((value for key, value in error.trailing_metadata() or ()
                        if key == "grpc-status-details-bin"), b"")
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
    headers: List[Tuple[str, str]]  # in the order received
    body: bytes
    body_truncated: bool
    reused: bool  # the upstream connection had carried an earlier request
    connection_id: int
    raw: egress_pb2.FetchResponse  # everything else: timing, remote address, idle time

    @classmethod
    def of(cls, raw: egress_pb2.FetchResponse) -> "Response":
        return cls(status_code=raw.status_code,
                   headers=[(h.name, h.value) for h in raw.headers],
                   body=raw.body,
                   body_truncated=raw.body_truncated,
                   reused=raw.connection.reused,
                   connection_id=raw.connection.connection_id,
                   raw=raw)

    def header(self, name: str) -> Optional[str]:
        """The first value of header `name` (case-insensitive), or None. A value that is
        not UTF-8 comes as its bytes read as ISO-8859-1: one character per byte."""
        value = self.header_bytes(name)
        return None if value is None else self._text(value)

    def header_bytes(self, name: str) -> Optional[bytes]:
        """The first value of header `name` (case-insensitive) exactly as the upstream
        sent it, as bytes, or None."""
        return next((h.value_bytes or h.value.encode() for h in self.raw.headers
                     if h.name.lower() == name.lower()), None)

    @staticmethod
    def _text(value: bytes) -> str:
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
    ca_file: Optional[str] = None
    cert_file: Optional[str] = None
    key_file: Optional[str] = None
    server_name: Optional[str] = None


def _read(path: Optional[str]) -> Optional[bytes]:
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


def channel_args(tls: Optional[Tls], extra: Sequence[Tuple[str, object]] = (),
                 balance: bool = False):
    """The credentials (None: plaintext) and the options of a channel to egressd, the
    same for grpc.secure_channel and grpc.aio.secure_channel."""
    options = list(extra)
    names = {name for name, _ in options}
    if "grpc.max_receive_message_length" not in names:
        options += _UNLIMITED_RECEIVE
    if balance and not names & {"grpc.service_config", "grpc.lb_policy_name"}:
        options.append(("grpc.service_config", DEFAULT_SERVICE_CONFIG))
    if tls is None:
        return None, options
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ValueError("Tls: cert_file and key_file go together")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file), private_key=_read(tls.key_file),
        certificate_chain=_read(tls.cert_file))
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return credentials, options


class ClientBase:
    """What EgressClient and AsyncEgressClient hold, made the same way from the same
    arguments (see EgressClient): the Egress channel (round robin unless `options` say
    otherwise), the admin channel, their stubs, the deadline, the caller metadata, the
    admin token's metadata and the retries of turned-away fetches. A subclass names the
    module whose channels it opens: grpc or grpc.aio."""

    _grpc: Any = grpc

    def __init__(self, target: str = "127.0.0.1:50051", admin_target: str = "127.0.0.1:50052",
                 timeout: float = 30.0, *, tls: Optional[Tls] = None,
                 admin_tls: Optional[Tls] = None, admin_token: Optional[str] = None,
                 metadata: Metadata = (), options: Sequence[Tuple[str, object]] = (),
                 shutdown_retries: int = 3) -> None:
        self._channel = self._open(target, tls, options, balance=True)
        self._admin_channel = self._open(admin_target, admin_tls)
        self._shutdown_retries = max(0, shutdown_retries)
        self._egress = egress_pb2_grpc.EgressStub(self._channel)
        self._admin = egress_pb2_grpc.TransportAdminStub(self._admin_channel)
        self._timeout = timeout
        self._metadata = tuple(metadata)
        self._admin_metadata = admin_metadata(admin_token)

    def _open(self, target: str, tls: Optional[Tls], extra: Sequence[Tuple[str, object]] = (),
              balance: bool = False):
        credentials, options = channel_args(tls, extra, balance)
        if credentials is None:
            return self._grpc.insecure_channel(target, options)
        return self._grpc.secure_channel(target, credentials, options)


def admin_metadata(admin_token: Optional[str]) -> Metadata:
    return (("authorization", f"Bearer {admin_token}"),) if admin_token else ()


def fetch_request(url: str, method: str, headers: Sequence[Tuple[str, HeaderValue]],
                  body: bytes, head_only: bool, prefix: Optional[int], max_body_bytes: int,
                  follow_redirects: bool) -> egress_pb2.FetchRequest:
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
    return request


def turned_away(error: EgressError, method: str) -> bool:
    """Whether a stopping egressd turned the fetch away before its GOAWAY reached the
    channel: refused it, or (a call that arrived once gRPC's shutdown had begun) cancelled
    it, which only a request safe to repeat survives."""
    if error.code == grpc.StatusCode.CANCELLED:
        return method in ("", "GET", "HEAD", "OPTIONS", "TRACE")
    return error.code == grpc.StatusCode.UNAVAILABLE and error.reason == "SHUTTING_DOWN"


def retry_pause(attempt: int) -> float:
    """The pause before retry `attempt + 1` of a turned-away fetch: the first goes at once
    (round_robin hands it to the next replica); later ones give the refusing egressd's
    GOAWAY a moment to arrive."""
    return 0.01 * attempt
