"""``/metrics`` names models, private ones included: only the operator reads it (the
admin key, a key holding ``platform.manage``, or the scraper's ``metrics_token``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from tests.conftest import ADMIN_KEY
from tests.databases import migrated_sqlite

SCRAPER = "scraper-token-" + "s" * 24


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Services]]:
    settings = Settings(
        home=tmp_path / "home",
        database_url=migrated_sqlite(tmp_path / "modelport.db"),
        admin_key=ADMIN_KEY,
        metrics_token=SCRAPER,
        auto_migrate=True,
    )
    services = build_services(settings)
    with TestClient(create_app(services)) as client:
        # A private model's series: what a tenant must not read.
        services.metrics.version("acme/secret", "1").cold_start()
        yield client, services
    services.close()


def test_metrics_need_the_operator(served: tuple[TestClient, Services]) -> None:
    client, services = served
    services.tenancy.create_tenant("globex", actor="admin", owner="owner")
    tenant_key = services.tenancy.create_key("globex", "owner", name="k", actor="admin").secret
    for headers, status, code in [
        ({}, 401, "missing_credentials"),
        (bearer("not-a-key"), 401, "invalid_credentials"),
        (bearer(tenant_key), 403, "forbidden"),
    ]:
        response = client.get("/metrics", headers=headers)
        assert response.status_code == status, response.text
        assert response.json()["code"] == code
        assert "acme/secret" not in response.text
    for token in (ADMIN_KEY, SCRAPER):
        response = client.get("/metrics", headers=bearer(token))
        assert response.status_code == 200
        assert 'model="acme/secret"' in response.text


def test_the_scraper_token_opens_nothing_else(served: tuple[TestClient, Services]) -> None:
    client, _ = served
    assert client.get("/api/models", headers=bearer(SCRAPER)).status_code == 401


def test_a_short_metrics_token_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="metrics_token"):
        Settings(home=tmp_path, metrics_token="short")
