"""The connection guard of declared backends: each request is checked by the policy and
sent to the address just checked, the URL's host kept in ``Host`` and in TLS; a refused
one never reaches the transport."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest

from modelport.clock import ManualClock
from modelport.netpolicy import UrlPolicy
from modelport.serving.backends.guard import BackendRefused, PolicyTransport

PUBLIC_V4, PUBLIC_V6 = "93.184.216.34", "2606:2800:220:1::1"


def call(
    names: dict[str, Sequence[str]], url: str, allow: Sequence[str] = ()
) -> list[httpx.Request]:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    def resolve(host: str, port: int) -> Sequence[str]:
        return names[host]

    policy = UrlPolicy(allow, resolve, require_https=False, subject="backend")

    async def go() -> None:
        transport = PolicyTransport(policy, httpx.MockTransport(record))
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get(url)

    asyncio.run(go())
    return sent


@pytest.mark.parametrize("address", [PUBLIC_V4, PUBLIC_V6])
def test_a_request_goes_to_the_checked_address_under_its_own_name(address: str) -> None:
    (sent,) = call({"models.example.com": [address]}, "https://models.example.com:8443/v2/x?a=1")
    assert sent.url.host == address and sent.url.port == 8443
    assert sent.url.raw_path == b"/v2/x?a=1"
    assert sent.headers["host"] == "models.example.com:8443"
    assert sent.extensions["sni_hostname"] == "models.example.com"


def test_an_allow_listed_host_is_reached_by_name() -> None:
    (sent,) = call({}, "http://worker-0.workers:8000/v2/health/ready", allow=["worker-0.workers"])
    assert sent.url.host == "worker-0.workers"


@pytest.mark.parametrize(
    ("names", "url"),
    [
        ({"models.example.com": ["10.0.0.7"]}, "http://models.example.com/v2"),
        ({"models.example.com": [PUBLIC_V4, "fd00::7"]}, "http://models.example.com/v2"),
        ({}, "http://169.254.169.254/latest/meta-data/"),
        ({}, "http://[::1]:8000/v2"),
    ],
)
def test_a_refused_request_never_reaches_the_transport(
    names: dict[str, Sequence[str]], url: str
) -> None:
    with pytest.raises(BackendRefused, match="refused by the backend URL policy"):
        call(names, url)  # a request that reached the transport would answer 200


def test_a_verdict_is_kept_for_its_ttl_and_a_rebinding_after_it_is_refused() -> None:
    names = {"models.example.com": [PUBLIC_V4]}
    lookups: list[str] = []
    sent: list[httpx.Request] = []

    def resolve(host: str, port: int) -> Sequence[str]:
        lookups.append(host)
        return names[host]

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    clock = ManualClock()
    policy = UrlPolicy((), resolve, require_https=False, subject="backend")
    transport = PolicyTransport(policy, httpx.MockTransport(record), ttl=10, clock=clock)

    async def go() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(5):
                await client.get("http://models.example.com/v2/health/ready")
            names["models.example.com"] = ["10.0.0.7"]  # the name now points inside
            await client.get("http://models.example.com/v2/health/ready")
            clock.advance(11)
            with pytest.raises(BackendRefused, match="private"):
                await client.get("http://models.example.com/v2/health/ready")

    asyncio.run(go())
    assert lookups == ["models.example.com", "models.example.com"]
    # Within the TTL, even after the name moved, requests went to the address checked.
    assert [r.url.host for r in sent] == [PUBLIC_V4] * 6
