"""Every connection to a declared remote backend goes through the outgoing-connection
policy (``modelport.netpolicy``) again, not only its declaration: the host is resolved
and checked before each request (health probe, load, inference, stream), and the
request then goes to the address just checked, so a name that resolves to an internal
address by then (DNS rebinding) is refused without a byte sent.

A verdict is kept for a short while (``ttl``) by scheme, host and port, so a busy
backend does not cost a name lookup per call: within it, requests go to the addresses
that were checked, never to what the name resolves to now."""

from __future__ import annotations

import asyncio

import httpx

from modelport.clock import Clock, SystemClock
from modelport.netpolicy import Target, UrlPolicy, UrlRefused

Verdict = Target | UrlRefused


class BackendRefused(httpx.ConnectError):
    """The policy refused the connection; the backend maps it like any unreachable
    remote (``backend_unreachable``), naming the rule."""


class PolicyTransport(httpx.AsyncBaseTransport):
    """``inner`` (a plain HTTP transport by default) behind the policy's check."""

    def __init__(
        self,
        policy: UrlPolicy,
        inner: httpx.AsyncBaseTransport | None = None,
        *,
        ttl: float = 10.0,
        clock: Clock | None = None,
    ) -> None:
        self._policy = policy
        self._inner = inner or httpx.AsyncHTTPTransport()
        self._ttl = ttl
        self._clock = clock or SystemClock()
        self._verdicts: dict[tuple[str, str, int | None], tuple[float, Verdict]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = await self._verdict(request.url)
        if isinstance(target, UrlRefused):
            raise BackendRefused(f"refused by the backend URL policy: {target}", request=request)
        if target.addresses:
            # The Host header stays the URL's (httpx set it when the request was built);
            # TLS still names, and verifies the certificate of, the URL's host.
            if request.url.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": target.host}
            request.url = request.url.copy_with(host=target.addresses[0])
        return await self._inner.handle_async_request(request)

    async def _verdict(self, url: httpx.URL) -> Verdict:
        key = (url.scheme, url.host, url.port)
        now = self._clock.monotonic()
        kept = self._verdicts.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        verdict: Verdict
        try:
            # Resolving may block: off the event loop.
            verdict = await asyncio.to_thread(self._policy.check, str(url))
        except UrlRefused as exc:
            verdict = exc
        if len(self._verdicts) > 1024:  # a backend has one host; bound it anyway
            self._verdicts.clear()
        self._verdicts[key] = (now + self._ttl, verdict)
        return verdict

    async def aclose(self) -> None:
        await self._inner.aclose()
