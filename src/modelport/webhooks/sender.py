"""Posting one attempt of a delivery over HTTP: a checked target, no redirects followed,
a timeout, the receiver's body never read."""

from __future__ import annotations

import ssl
import time
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from modelport import __version__
from modelport.netpolicy import Target, pinned_url, verified_tls
from modelport.webhooks.types import Outcome

__all__ = ["USER_AGENT", "HttpSender", "Sender", "pinned_url"]

USER_AGENT = f"modelport-webhooks/{__version__}"


class Sender(Protocol):
    """Posts ``body`` with ``headers`` to a checked target; never raises for what the
    network or the receiver did (that is the ``Outcome``)."""

    def send(self, target: Target, body: bytes, headers: dict[str, str]) -> Outcome: ...

    def close(self) -> None: ...


class HttpSender:
    """``Sender`` over one ``httpx.Client`` (thread-safe: several attempts at once)."""

    def __init__(self, timeout_seconds: float, *, verify: ssl.SSLContext | bool = True) -> None:
        self._client = httpx.Client(
            timeout=timeout_seconds,
            verify=verified_tls() if verify is True else verify,
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment would bypass the pinning
            headers={"user-agent": USER_AGENT},
        )

    def send(self, target: Target, body: bytes, headers: dict[str, str]) -> Outcome:
        started = time.monotonic()
        request_headers = {"content-type": "application/json", **headers}
        url = target.url
        extensions: dict[str, str] = {}
        if target.addresses:
            url = pinned_url(target, target.addresses[0])
            request_headers["host"] = urlsplit(target.url).netloc
            if urlsplit(target.url).scheme == "https":
                # TLS still names (and verifies the certificate of) the URL's host.
                extensions["sni_hostname"] = target.host
        try:
            with self._client.stream(
                "POST", url, content=body, headers=request_headers, extensions=extensions
            ) as response:
                status = response.status_code
        except httpx.TimeoutException:
            return Outcome(None, "timeout", _ms(started))
        except httpx.HTTPError as exc:
            return Outcome(None, f"{type(exc).__name__}: {exc}"[:500], _ms(started))
        error = None if 200 <= status < 300 else f"HTTP {status}"
        return Outcome(status, error, _ms(started))

    def close(self) -> None:
        self._client.close()


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
