"""Two ``modelport serve`` processes sharing one Redis and one database enforce one
global limit: N clients spread over both never get more than the limit through."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelport.app import Services
from modelport.tenancy.limits import ScopeType
from tests.conftest import ADMIN_KEY, free_port
from tests.limits.conftest import ADDER_BODY, Platform, PlatformFactory, bearer
from tests.serve_process import serve, wait_healthy

pytestmark = pytest.mark.slow  # starts real processes


@pytest.fixture
def gateways(
    make_platform: PlatformFactory, redis_url: str, tmp_path: Path
) -> Iterator[tuple[list[str], Platform, str]]:
    # This process migrates the shared SQLite database and makes the signing key first.
    platform = make_platform(redis_url=redis_url)
    home = platform.services.settings.store.home
    key = platform.tenant("acme", ("app", ["consumer"]))["app"]
    platform.publisher.adder()
    procs, urls = [], []
    try:
        for _ in range(2):
            port = free_port()
            procs.append(serve(home, port, MODELPORT_REDIS_URL=redis_url))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs, strict=True):
            wait_healthy(url, proc)
            loaded = httpx.post(
                f"{url}/v2/repository/models/acme/adder/load",
                json={},
                headers=bearer(ADMIN_KEY),
                timeout=60,
            )
            assert loaded.status_code == 200, loaded.text
        yield urls, platform, key
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def test_two_gateways_enforce_one_global_rate_limit(gateways) -> None:
    urls, platform, key = gateways
    services: Services = platform.services
    services.limits.set_limits(
        ScopeType.TENANT, "acme", tenant="acme", rpm=10, concurrency=None, tpm=None, actor="t"
    )
    statuses: list[tuple[int, int]] = []
    barrier = threading.Barrier(40)

    def call(i: int) -> None:
        url = urls[i % 2]
        with httpx.Client(timeout=30) as client:
            barrier.wait()
            response = client.post(
                f"{url}/v2/models/acme/adder/infer", json=ADDER_BODY, headers=bearer(key)
            )
        statuses.append((i % 2, response.status_code))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(status for _, status in statuses) == [200] * 10 + [429] * 30
    # Both gateways refused some: each alone would have let 10 of its own 20 through.
    assert {gw for gw, status in statuses if status == 429} == {0, 1}
