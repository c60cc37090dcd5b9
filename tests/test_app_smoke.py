"""The platform starts, reports health, and guards /api with the admin key."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from modelport.config import Settings
from modelport.errors import InvalidInput
from modelport.tenancy.admin import AdminKeyAuthenticator


def test_healthz_and_readyz(anon_client: TestClient) -> None:
    assert anon_client.get("/healthz").json() == {"status": "ok"}
    assert anon_client.get("/readyz").status_code == 200


def test_openapi_is_published(anon_client: TestClient) -> None:
    spec = anon_client.get("/api/openapi.json").json()
    assert spec["info"]["title"] == "modelport"


@pytest.mark.parametrize("header", [None, "Bearer wrong-key", "Basic abc", "Bearer "])
def test_api_refuses_missing_or_wrong_admin_key(
    anon_client: TestClient, header: str | None
) -> None:
    headers = {"Authorization": header} if header else {}
    response = anon_client.get("/api/models", headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] in ("missing_credentials", "invalid_credentials")
    assert body["status"] == 401


def test_short_admin_key_is_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        AdminKeyAuthenticator("short")
    assert info.value.code == "weak_admin_key"


def test_unknown_api_route_is_problem_json(client: TestClient) -> None:
    response = client.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_settings_default_to_embedded_sqlite(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    assert settings.store.resolved_database_url.startswith("sqlite:///")
    assert settings.store.should_auto_migrate


def test_a_serving_process_keeps_its_startup_objects_out_of_full_collections(tmp_path) -> None:
    import gc

    from modelport.app import build_app

    gc.unfreeze()
    thresholds = gc.get_threshold()
    app = build_app(Settings(home=tmp_path, admin_key="smoke-admin-key-" + "s" * 24))
    try:
        assert gc.get_freeze_count() > 0  # what build_app found alive is frozen
        assert TestClient(app).get("/healthz").status_code == 200
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        app.state.services.close()
