"""Endpoint and backend names are one platform-wide namespace by design: an endpoint's
name is also its model name on ``/v2``, which has no tenant in its paths. So creating
one under a name another tenant uses answers 409, which tells the caller that the name
is taken, as a taken user name does, and must tell nothing else: not whose it is, nor
anything about it."""

from __future__ import annotations

import pytest

from tests.security.world import ADMIN, BACKEND, ENDPOINT, World


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/api/endpoints", {"name": ENDPOINT}, "endpoint_exists"),
        (
            "/api/backends",
            {"name": BACKEND, "kind": "remote_v2", "url": "http://backend.invalid"},
            "backend_exists",
        ),
    ],
)
def test_a_name_another_tenant_uses_is_refused_revealing_only_that_it_is_taken(
    world: World, path: str, body: dict[str, str], code: str
) -> None:
    before = world.client.get(f"{path}/{body['name']}", headers=ADMIN).json()
    response = world.client.post(path, json=body, headers=world.attacker("owner"))
    assert response.status_code == 409, response.text
    assert response.json()["code"] == code
    assert "acme" not in response.text
    assert world.leaks(response, f"POST {path} {body}") == []
    assert world.client.get(f"{path}/{body['name']}", headers=ADMIN).json() == before
