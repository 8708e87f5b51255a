"""A Python client for egressd: EgressClient (synchronous) and, in egress_client.aio,
AsyncEgressClient (asyncio, grpc.aio) with the same options. The generated stubs are in
egress_client.v1 (egress_pb2: Config, FetchRequest, ...).

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

import time
from typing import Optional, Sequence, Tuple

import grpc

from egress_client._common import (DEFAULT_SERVICE_CONFIG, ClientBase, EgressError, HeaderValue,
                                   Response, Tls, fetch_request, retry_pause, turned_away)
from egress_client._version import __version__
from egress_client.v1 import egress_pb2

__all__ = ["EgressClient", "EgressError", "Response", "Tls", "DEFAULT_SERVICE_CONFIG",
           "__version__"]


class EgressClient(ClientBase):
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

    def __enter__(self) -> "EgressClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()
        self._admin_channel.close()

    def fetch(self, url: str, *, method: str = "", headers: Sequence[Tuple[str, HeaderValue]] = (),
              body: bytes = b"", head_only: bool = False, prefix: Optional[int] = None,
              max_body_bytes: int = 0, timeout: Optional[float] = None,
              follow_redirects: bool = False) -> Response:
        """One HTTP request through egressd. headers: (name, value) pairs, a value
        str or (sent byte for byte) bytes. head_only: status and headers (egressd
        drains the body); prefix=N: the first N bytes. An HTTP error status is a
        Response; EgressError when there is no HTTP answer."""
        request = fetch_request(url, method, headers, body, head_only, prefix, max_body_bytes,
                                follow_redirects)
        deadline = time.monotonic() + (timeout or self._timeout)
        for attempt in range(self._shutdown_retries + 1):
            try:
                return Response.of(self._call(self._egress.Fetch, request,
                                              max(deadline - time.monotonic(), 0.001),
                                              self._metadata))
            except EgressError as error:
                pause = retry_pause(attempt)
                if (not turned_away(error, method) or attempt == self._shutdown_retries
                        or time.monotonic() + pause >= deadline):
                    raise
                time.sleep(pause)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def get_config(self) -> egress_pb2.Config:
        return self._admin_call(self._admin.GetConfig, egress_pb2.GetConfigRequest())

    def update_config(self, config: egress_pb2.Config) -> egress_pb2.Config:
        """Swaps in `config` (an egress_pb2.Config) whole; returns the config in force."""
        return self._admin_call(self._admin.UpdateConfig,
                                egress_pb2.UpdateConfigRequest(config=config))

    def pool_stats(self) -> egress_pb2.PoolStats:
        return self._admin_call(self._admin.GetPoolStats, egress_pb2.GetPoolStatsRequest())

    def _admin_call(self, method, request):
        return self._call(method, request, metadata=self._admin_metadata)

    def _call(self, method, request, timeout=None, metadata=()):
        try:
            return method(request, timeout=timeout or self._timeout, metadata=metadata)
        except grpc.RpcError as error:
            raise EgressError.from_rpc_error(error) from None
