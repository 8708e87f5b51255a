"""A small Python client for egressd over its generated gRPC stubs.

The stubs are generated from proto/egress/v1/egress.proto (client/python/generate.sh);
put the directory holding them on sys.path (or PYTHONPATH) before importing this module.

    from egress_client import EgressClient, EgressError
    with EgressClient("127.0.0.1:50051") as egress:
        response = egress.fetch("https://api.example.com/v1/items", head_only=True)
        print(response.status_code, response.reused)
"""

import dataclasses

import grpc
from egress.v1 import egress_pb2, egress_pb2_grpc


class EgressError(Exception):
    """egressd could not give an HTTP answer: `code` is the grpc.StatusCode
    (INVALID_ARGUMENT, PERMISSION_DENIED, UNAVAILABLE, DEADLINE_EXCEEDED,
    RESOURCE_EXHAUSTED, ...), `message` egressd's words."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


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


class EgressClient:
    """Fetch and the admin calls; every call has a deadline (`timeout` seconds)."""

    def __init__(self, target="127.0.0.1:50051", admin_target="127.0.0.1:50052",
                 timeout=30.0):
        self._channel = grpc.insecure_channel(target)
        self._admin_channel = grpc.insecure_channel(admin_target)
        self._egress = egress_pb2_grpc.EgressStub(self._channel)
        self._admin = egress_pb2_grpc.TransportAdminStub(self._admin_channel)
        self._timeout = timeout

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
        raw = self._call(self._egress.Fetch, request, timeout)
        return Response(
            status_code=raw.status_code,
            headers=[(h.name, h.value) for h in raw.headers],
            body=raw.body,
            body_truncated=raw.body_truncated,
            reused=raw.connection.reused,
            connection_id=raw.connection.connection_id,
            raw=raw)

    def get_config(self):
        return self._call(self._admin.GetConfig, egress_pb2.GetConfigRequest())

    def update_config(self, config):
        """Swaps in `config` (an egress_pb2.Config) whole; returns the config in force."""
        return self._call(self._admin.UpdateConfig, egress_pb2.UpdateConfigRequest(config=config))

    def pool_stats(self):
        return self._call(self._admin.GetPoolStats, egress_pb2.GetPoolStatsRequest())

    def _call(self, method, request, timeout=None):
        try:
            return method(request, timeout=timeout or self._timeout)
        except grpc.RpcError as error:
            raise EgressError(error.code(), error.details()) from None
