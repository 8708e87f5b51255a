"""The asyncio client: AsyncEgressClient, over grpc.aio, with the options of the
synchronous EgressClient (target, TLS, caller metadata, deadlines, retries of fetches a
stopping egressd turned away, round robin over every replica). Create it inside the
running event loop:

    from egress_client import EgressError
    from egress_client.aio import AsyncEgressClient

    async with AsyncEgressClient("127.0.0.1:50051") as egress:
        response = await egress.fetch("https://api.example.com/v1/items", head_only=True)
"""

import asyncio
import time
from typing import Optional, Sequence, Tuple

import grpc
import grpc.aio

from egress_client._common import (EgressError, HeaderValue, Metadata, Response, Tls,
                                   admin_metadata, channel_args, fetch_request, retry_pause,
                                   turned_away)
from egress_client.v1 import egress_pb2, egress_pb2_grpc

__all__ = ["AsyncEgressClient"]


def _channel(target: str, tls: Optional[Tls], extra=(), balance: bool = False) -> grpc.aio.Channel:
    credentials, options = channel_args(tls, extra, balance)
    if credentials is None:
        return grpc.aio.insecure_channel(target, options)
    return grpc.aio.secure_channel(target, credentials, options)


class AsyncEgressClient:
    """EgressClient's calls as coroutines; the same arguments (see EgressClient)."""

    def __init__(self, target: str = "127.0.0.1:50051", admin_target: str = "127.0.0.1:50052",
                 timeout: float = 30.0, *, tls: Optional[Tls] = None,
                 admin_tls: Optional[Tls] = None, admin_token: Optional[str] = None,
                 metadata: Metadata = (), options: Sequence[Tuple[str, object]] = (),
                 shutdown_retries: int = 3) -> None:
        self._channel = _channel(target, tls, options, balance=True)
        self._admin_channel = _channel(admin_target, admin_tls)
        self._shutdown_retries = max(0, shutdown_retries)
        self._egress = egress_pb2_grpc.EgressStub(self._channel)
        self._admin = egress_pb2_grpc.TransportAdminStub(self._admin_channel)
        self._timeout = timeout
        self._metadata = tuple(metadata)
        self._admin_metadata = admin_metadata(admin_token)

    async def __aenter__(self) -> "AsyncEgressClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()
        await self._admin_channel.close()

    async def fetch(self, url: str, *, method: str = "",
                    headers: Sequence[Tuple[str, HeaderValue]] = (), body: bytes = b"",
                    head_only: bool = False, prefix: Optional[int] = None,
                    max_body_bytes: int = 0, timeout: Optional[float] = None,
                    follow_redirects: bool = False) -> Response:
        """One HTTP request through egressd (see EgressClient.fetch)."""
        request = fetch_request(url, method, headers, body, head_only, prefix, max_body_bytes,
                                follow_redirects)
        deadline = time.monotonic() + (timeout or self._timeout)
        for attempt in range(self._shutdown_retries + 1):
            try:
                return Response.of(await self._call(self._egress.Fetch, request,
                                                    max(deadline - time.monotonic(), 0.001),
                                                    self._metadata))
            except EgressError as error:
                pause = retry_pause(attempt)
                if (not turned_away(error, method) or attempt == self._shutdown_retries
                        or time.monotonic() + pause >= deadline):
                    raise
                await asyncio.sleep(pause)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def get_config(self) -> egress_pb2.Config:
        return await self._admin_call(self._admin.GetConfig, egress_pb2.GetConfigRequest())

    async def update_config(self, config: egress_pb2.Config) -> egress_pb2.Config:
        """Swaps in `config` (an egress_pb2.Config) whole; returns the config in force."""
        return await self._admin_call(self._admin.UpdateConfig,
                                      egress_pb2.UpdateConfigRequest(config=config))

    async def pool_stats(self) -> egress_pb2.PoolStats:
        return await self._admin_call(self._admin.GetPoolStats, egress_pb2.GetPoolStatsRequest())

    async def _admin_call(self, method, request):
        return await self._call(method, request, metadata=self._admin_metadata)

    async def _call(self, method, request, timeout=None, metadata=()):
        try:
            return await method(request, timeout=timeout or self._timeout, metadata=metadata)
        except grpc.aio.AioRpcError as error:
            raise EgressError.from_rpc_error(error) from None
