"""Without ``MODELPORT_OIDC_ISSUER`` a JWT is just a malformed API key."""

from __future__ import annotations

import base64
import json
import time

from joserfc import jwt

from tests.tenancy.conftest import World, bearer
from tests.tenancy.oidc_provider import AUDIENCE, rsa_key
from tests.tenancy.test_roles import infer


def test_jwts_are_refused_as_bad_keys_when_oidc_is_off(world: World) -> None:
    assert world.services.oidc is None
    key = rsa_key("k1")
    now = int(time.time())
    claims = {"iss": "https://id.example", "sub": "alice", "aud": AUDIENCE, "exp": now + 300}
    token = jwt.encode({"alg": "RS256", "kid": "k1"}, {**claims, "groups": ["acme"]}, key)
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none"}).encode()).decode().rstrip("=")
    unsigned = header + "." + token.split(".")[1] + "."
    for forged in (token, unsigned):
        for response in (
            world.client.get("/api/models", headers=bearer(forged)),
            infer(world, bearer(forged)),
        ):
            assert response.status_code == 401, response.text
        response = world.client.get("/api/models", headers=bearer(forged))
        assert response.json()["code"] == "invalid_credentials"


def test_no_sign_in_routes_when_oidc_is_off(world: World) -> None:
    for path in ("/auth/oidc/login", "/auth/oidc/callback?code=c&state=s"):
        assert world.client.get(path, follow_redirects=False).status_code == 404
