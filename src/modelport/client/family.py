"""The base of the resource families: each holds the transport it runs its calls on."""

from __future__ import annotations

from modelport.client.transport import AsyncTransport, Transport


class Family:
    def __init__(self, transport: Transport) -> None:
        self._t = transport


class AsyncFamily:
    def __init__(self, transport: AsyncTransport) -> None:
        self._t = transport
