"""What a gateway runs of the pool: its view of the live workers, its placer, its
autoscaler, and the replica provider its router dispatches through; started and
stopped as one component of its lifecycle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from modelport.serving.pool.placement import PoolPlacement
from modelport.serving.pool.replicas import PoolReplicas
from modelport.serving.pool.scaler import PoolScaler
from modelport.serving.pool.view import PoolView


@dataclass
class GatewayPool:
    view: PoolView
    placement: PoolPlacement
    replicas: PoolReplicas
    close: Callable[[], Awaitable[object]]
    """Closes the connections to the workers."""
    scaler: PoolScaler | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[GatewayPool]:
        await asyncio.to_thread(self.view.start)  # its first read before any placement
        self.placement.start()
        if self.scaler is not None:
            self.scaler.start()
        try:
            yield self
        finally:
            if self.scaler is not None:
                self.scaler.stop()
            self.placement.stop()
            self.view.stop()
            await self.close()
