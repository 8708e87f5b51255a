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

from egress_client._common import (ClientBase, EgressError, HeaderValue, Response,
                                   fetch_request, retry_pause, turned_away)
from egress_client.v1 import egress_pb2

__all__ = ["AsyncEgressClient"]


class AsyncEgressClient(ClientBase):
    """EgressClient's calls as coroutines; the same arguments (see EgressClient)."""

    _grpc = grpc.aio

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
