"""The console's one way to the platform: the HTTP API of the same application, called
in process with the signed-in credential, so every page is authorized as the API
authorizes that key and nothing bypasses it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.types import ASGIApp

INTERNAL_BASE = "http://console.internal"
"""The base URL of in-process calls (never resolved: the transport is the app itself)."""


class SignedOut(Exception):
    """The API refused the session's credential (revoked, expired): sign in again."""


@dataclass(frozen=True)
class Answer:
    """An API response, decoded."""

    status: int
    body: Any
    """The JSON body (None when it is not JSON)."""
    seconds: float
    """Wall time of the call, as the console measured it."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> str:
        """The problem's message and stable code (``api/problems.py``), for a page."""
        if isinstance(self.body, dict):
            message = str(self.body.get("error") or self.body.get("detail") or "")
            code = self.body.get("code")
            return f"{message} ({code})" if code else message
        return f"HTTP {self.status}"


class PlatformAPI:
    """Calls the application ``app`` in process as the holder of ``credential``."""

    def __init__(self, app: ASGIApp, credential: str) -> None:
        self._app = app
        self._credential = credential

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
        signed_out_on_401: bool = True,
    ) -> Answer:
        """One call; a 401 raises ``SignedOut`` (the page then sends the person to sign
        in), every other status is the caller's to show."""
        transport = httpx.ASGITransport(app=self._app)
        headers = {"Authorization": f"Bearer {self._credential}"}
        async with httpx.AsyncClient(
            transport=transport, base_url=INTERNAL_BASE, headers=headers, timeout=60.0
        ) as client:
            started = time.perf_counter()
            response = await client.request(method, path, params=params, json=json)
            seconds = time.perf_counter() - started
        if response.status_code == 401 and signed_out_on_401:
            raise SignedOut
        try:
            body = response.json()
        except ValueError:
            body = None
        return Answer(status=response.status_code, body=body, seconds=seconds)

    async def get(self, path: str, **params: str | None) -> Answer:
        kept = {k: v for k, v in params.items() if v not in (None, "")}
        return await self.call("GET", path, params=kept)
