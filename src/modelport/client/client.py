"""``Client`` and ``AsyncClient``: one object per server, a family of calls per resource."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Self

from modelport.client.aliases import Aliases, AsyncAliases
from modelport.client.assets import Assets, AsyncAssets
from modelport.client.billing import AsyncInvoices, AsyncUsage, Invoices, Usage
from modelport.client.endpoints import AsyncEndpoints, Endpoints
from modelport.client.grants import AsyncGrants, Grants
from modelport.client.jobs import AsyncJobs, Jobs
from modelport.client.keys import AsyncKeys, Keys
from modelport.client.limits import AsyncLimitsFamily, LimitsFamily
from modelport.client.models import AsyncModels, Models
from modelport.client.predict import AsyncPredict, Inputs, Predict
from modelport.client.prices import AsyncPrices, Prices
from modelport.client.transfer import Advance, Uploader, UploadState, download
from modelport.client.transport import (
    DEFAULT_TIMEOUT,
    DEFAULT_URL,
    AsyncTransport,
    Transport,
)
from modelport.client.types import InferResult
from modelport.client.versions import AsyncVersions, Versions


class Client:
    """The platform's ``/api`` and ``/v2`` from Python, synchronously::

        with Client("http://127.0.0.1:8080", api_key="...") as client:
            version = client.versions.get("acme/iris:1")
            result = client.infer("acme/iris:1", {"x": numpy.ones((1, 4), "float32")})

    A URL without a scheme means ``http://``. Errors are ``modelport.client.errors``:
    the server's problems by status (``NotFound``, ``Conflict``, ...; each with ``code``
    and ``detail``), ``ConnectionFailed`` when nothing answered."""

    def __init__(
        self, url: str = DEFAULT_URL, api_key: str = "", *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.transport = Transport(url, api_key, timeout=timeout)
        self.url = self.transport.url
        self.http = self.transport.http
        """The underlying ``httpx.Client`` (base URL and key set), for raw requests."""
        self.models = Models(self.transport)
        self.versions = Versions(self.transport)
        self.aliases = Aliases(self.transport)
        self.endpoints = Endpoints(self.transport)
        self.predict = Predict(self.transport)
        self.usage = Usage(self.transport)
        self.invoices = Invoices(self.transport)
        self.keys = Keys(self.transport)
        self.prices = Prices(self.transport)
        self.limits = LimitsFamily(self.transport)
        self.grants = Grants(self.transport)
        self.jobs = Jobs(self.transport)
        self.assets = Assets(self.transport)

    def infer(self, target: str, inputs: Inputs) -> InferResult:
        """Shorthand for ``predict.infer``: a model ref or an endpoint name."""
        return self.predict.infer(target, inputs)

    def uploader(self, chunk_size: int = 16 << 20, state: UploadState | None = None) -> Uploader:
        """Resumable chunked uploads of blobs to this server (see ``transfer``)."""
        return Uploader(self.http, self.url, state or UploadState(), chunk_size)

    def download(self, digest: str, size: int, dest: Path, advance: Advance) -> None:
        """Fetch a blob into ``dest``, verified, resuming a partial file."""
        download(self.http, digest, size, dest, advance)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient:
    """``Client`` for asyncio (every call awaited); uploads and downloads are ``Client``'s."""

    def __init__(
        self, url: str = DEFAULT_URL, api_key: str = "", *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.transport = AsyncTransport(url, api_key, timeout=timeout)
        self.url = self.transport.url
        self.http = self.transport.http
        self.models = AsyncModels(self.transport)
        self.versions = AsyncVersions(self.transport)
        self.aliases = AsyncAliases(self.transport)
        self.endpoints = AsyncEndpoints(self.transport)
        self.predict = AsyncPredict(self.transport)
        self.usage = AsyncUsage(self.transport)
        self.invoices = AsyncInvoices(self.transport)
        self.keys = AsyncKeys(self.transport)
        self.prices = AsyncPrices(self.transport)
        self.limits = AsyncLimitsFamily(self.transport)
        self.grants = AsyncGrants(self.transport)
        self.jobs = AsyncJobs(self.transport)
        self.assets = AsyncAssets(self.transport)

    async def infer(self, target: str, inputs: Inputs) -> InferResult:
        return await self.predict.infer(target, inputs)

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
