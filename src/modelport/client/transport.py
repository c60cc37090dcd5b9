"""HTTP for the client: the server URL checked once, one ``Call`` shape that the sync and
the async transport both run, and every httpx failure turned into a ``ClientError``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from modelport.client.errors import (
    ConfigurationError,
    ConnectionFailed,
    InvalidReference,
    error_from_response,
)

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 60.0
_WHERE = "check the URL (--url or MODELPORT_URL) and that the server runs (modelport serve)"


def normalize_url(url: str) -> str:
    """The server's base URL, without a trailing slash. A URL without a scheme
    (``localhost:8080``) means ``http://``; anything else but http(s) is refused."""
    text = url.strip()
    if not text:
        raise ConfigurationError(
            f"no server URL: set MODELPORT_URL or pass --url (for example {DEFAULT_URL})"
        )
    if "://" not in text:
        text = "http://" + text
    try:
        parsed = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"the server URL {url!r} is not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https"):
        raise ConfigurationError(
            f"the server URL {url!r} must start with http:// or https:// "
            f"(for example {DEFAULT_URL})"
        )
    if not parsed.host:
        raise ConfigurationError(f"the server URL {url!r} names no host")
    return text.rstrip("/")


def segment(value: str) -> str:
    """``value`` as one path segment."""
    return quote(value, safe="")


def split_model(ref: str) -> tuple[str, str]:
    """``owner/name`` -> (owner, name)."""
    owner, _, name = ref.partition("/")
    if not owner or not name or "/" in name or ":" in name:
        raise InvalidReference(f"expected owner/name, got {ref!r}")
    return owner, name


def model_path(ref: str) -> str:
    owner, name = split_model(ref)
    return f"/api/models/{segment(owner)}/{segment(name)}"


def version_path(ref: str, version: str | None = None) -> str:
    """``owner/name:V`` (or ``owner/name`` and ``version``) -> the version's API path."""
    if version is None:
        ref, _, version = ref.partition(":")
        if not version:
            raise InvalidReference(f"expected owner/name:version, got {ref!r}")
    return f"{model_path(ref)}/versions/{segment(version)}"


def connection_failed(url: str, exc: httpx.TransportError) -> ConnectionFailed | ConfigurationError:
    """One line for a request that got no answer, saying what to check."""
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ConfigurationError(
            f"the server URL {url!r} must start with http:// or https:// (for example {DEFAULT_URL})"
        )
    if isinstance(exc, httpx.TimeoutException):
        return ConnectionFailed(f"the server at {url} did not answer in time: {_WHERE}")
    reason = str(exc).strip() or type(exc).__name__
    return ConnectionFailed(f"cannot reach the server at {url} ({reason}): {_WHERE}")


def parse_body(response: httpx.Response) -> Any:
    """The JSON of a successful answer (None when it has no body)."""
    return response.json() if response.content else None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its successful answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    """Seconds to wait for the answer; None: the client's."""

    @property
    def options(self) -> dict[str, Any]:
        """The request's keyword arguments for httpx."""
        options: dict[str, Any] = {
            "params": _params(self.params),
            "json": self.json,
            "content": self.content,
            "headers": self.headers,
        }
        if self.timeout is not None:
            options["timeout"] = httpx.Timeout(self.timeout)
        return options


def _params(params: dict[str, Any] | None) -> dict[str, Any] | None:
    if params is None:
        return None
    return {k: v for k, v in params.items() if v is not None}


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class Transport:
    """Runs calls on one ``httpx.Client`` (``http``, for raw requests, shares it)."""

    def __init__(self, url: str, api_key: str = "", *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = normalize_url(url)
        self.http = httpx.Client(
            base_url=self.url, headers=_headers(api_key), timeout=httpx.Timeout(timeout)
        )

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A raw request; only transport failures raise (as ``ClientError``)."""
        try:
            return self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise connection_failed(self.url, exc) from exc

    def run(self, call: Call[T]) -> T:
        response = self.send(call.method, call.path, **call.options)
        if not response.is_success:
            raise error_from_response(response)
        return call.parse(parse_body(response))

    def close(self) -> None:
        self.http.close()


class AsyncTransport:
    """``Transport`` on an ``httpx.AsyncClient``."""

    def __init__(self, url: str, api_key: str = "", *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = normalize_url(url)
        self.http = httpx.AsyncClient(
            base_url=self.url, headers=_headers(api_key), timeout=httpx.Timeout(timeout)
        )

    async def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise connection_failed(self.url, exc) from exc

    async def run(self, call: Call[T]) -> T:
        response = await self.send(call.method, call.path, **call.options)
        if not response.is_success:
            raise error_from_response(response)
        return call.parse(parse_body(response))

    async def close(self) -> None:
        await self.http.aclose()
