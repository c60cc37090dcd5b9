"""The seam between routing and backends (implemented by ``modelport.serving.dispatch``).

The router decides *which version* and hands over that version's replicas and the
endpoint's fallback options; a ``Dispatcher`` decides *where and how*: replica
order by health, retries, circuit breaking, and walking the fallback chain. It
returns the answer with its provenance (``Served``), or raises a
``modelport.errors`` type when nothing could answer. ``open_stream`` does the same
for a stream up to its first chunk (``OpenedStream``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from modelport.clock import Clock
from modelport.serving.backends.base import Backend
from modelport.serving.types import BackendRequest, Served, StreamRequest, VersionRef

if TYPE_CHECKING:
    from modelport.serving.fallback import FallbackOption
    from modelport.serving.stream_dispatch import OpenedStream

ReplicaProvider = Callable[[VersionRef], Sequence[Backend]]
"""The backends (replicas) that can run a version, in the order to try them."""


class Dispatcher(Protocol):
    @property
    def clock(self) -> Clock:
        """What requests' deadlines are on."""
        ...

    async def dispatch(
        self,
        request: BackendRequest,
        replicas: Sequence[Backend],
        *,
        fallback: Sequence[FallbackOption] = (),
        endpoint: str = "",
    ) -> Served: ...

    async def open_stream(
        self,
        request: StreamRequest,
        replicas: Sequence[Backend],
        *,
        fallback: Sequence[FallbackOption] = (),
        endpoint: str = "",
    ) -> OpenedStream: ...
