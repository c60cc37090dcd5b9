"""An httpx transport that sends its requests with aiohttp's connection pool.

Why: under concurrency httpcore's pool (what ``httpx.AsyncHTTPTransport`` uses) is the
cost of a remote backend. It scans every connection on each request and each response
(expiry, a readability poll per idle connection, under an anyio lock) and sends a
request's head and body in two socket writes; at 64 calls in flight on one backend a
gateway paid several ms of CPU a call and fell to a tenth of the local rate (see
``docs/benchmarks.md``, "The remote_v2 HTTP backend under concurrency"). aiohttp keeps
idle connections in a queue (taking one is O(1)) and writes a small request in one go.

The client above stays httpx (its requests, responses, timeouts and errors), so the
backends, the policy guard (``guard.PolicyTransport``, wrapping this) and their error
mapping do not change: aiohttp's errors are raised as the httpx errors they mean.
Bodies are read whole (the remote OIP backend's answers are one body, not a stream).
"""

from __future__ import annotations

import asyncio

import aiohttp
import httpx


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Up to ``max_connections`` kept-alive HTTP/1.1 connections, reused across calls.

    The aiohttp session is made on the first request, on the loop that sends it."""

    def __init__(self, *, max_connections: int = 100, keepalive_expiry: float = 5.0) -> None:
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _open(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        # A session is bound to its loop: one used from another (a test's second
        # ``asyncio.run``) is left, as httpx's pool would leave its connections.
        if self._session is None or self._session.closed or self._loop is not loop:
            self._loop = loop
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=0,
                keepalive_timeout=self._keepalive_expiry,
                use_dns_cache=False,  # names are resolved where the policy checks them
                # The certificates httpx's own transport trusts, made once, not per call.
                ssl=httpx.create_ssl_context(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # httpx decodes the body by its Content-Encoding
                skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
                trust_env=False,  # proxies are the httpx client's business
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._open()
        body = await request.aread()
        try:
            async with session.request(
                request.method,
                str(request.url),
                data=body or None,
                headers=[
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw
                ],
                allow_redirects=False,  # httpx's follow_redirects decides, above
                timeout=_timeout(request),
                server_hostname=request.extensions.get("sni_hostname"),
                compress=None,
            ) as answer:
                content = await answer.read()
                headers = [(k, v) for k, v in answer.raw_headers]
                status = answer.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _httpx_error(exc, request) from exc
        return httpx.Response(
            status,
            headers=headers,
            content=content,
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _timeout(request: httpx.Request) -> aiohttp.ClientTimeout:
    """httpx's per-request timeouts as aiohttp's: waiting for a connection (pool and
    connect together), connecting, and each read."""
    limits = request.extensions.get("timeout") or {}
    pool, connect, read = limits.get("pool"), limits.get("connect"), limits.get("read")
    waiting = None if pool is None or connect is None else pool + connect
    return aiohttp.ClientTimeout(total=None, connect=waiting, sock_connect=connect, sock_read=read)


def _httpx_error(exc: Exception, request: httpx.Request) -> httpx.HTTPError:
    """The httpx error an aiohttp (or socket) failure means."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message, request=request)
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return httpx.ReadTimeout(message, request=request)
    if isinstance(exc, TimeoutError):
        return httpx.PoolTimeout(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message, request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(message, request=request)
    if isinstance(exc, aiohttp.ClientResponseError):  # a malformed answer
        return httpx.RemoteProtocolError(message, request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(message, request=request)
    if isinstance(exc, OSError):  # aiohttp.ClientOSError among them: reset, broken pipe
        return httpx.ReadError(message, request=request)
    return httpx.TransportError(message, request=request)
