"""OpenID Connect against a real local provider: its JWTs as bearer credentials on
``/api`` and ``/v2``, refusals (expired, forged, wrong audience or issuer, unmapped), key
rotation, and signing a person in with the authorization code flow and PKCE."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from pydantic import SecretStr

from modelport.app import build_services
from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.errors import Forbidden, InvalidInput, Unauthenticated, Unavailable
from modelport.tenancy.oidc import AuthorizationRequest, OidcClient
from tests.conftest import free_port
from tests.tenancy.conftest import ADMIN, World, bearer
from tests.tenancy.oidc_provider import AUDIENCE, CLIENT_ID, LocalProvider, ec_key, rsa_key
from tests.tenancy.test_roles import infer, publish

GROUP_ROLES = {
    "acme-consumers": "acme:consumer",
    "acme-billing": "acme:billing",
    "acme-publishers": "acme:publisher",
    "globex-consumers": "globex:consumer",
    "ghost-team": "ghost:consumer",
}
USERS = {
    "alice": ["acme-consumers"],
    "bob": ["acme-billing"],
    "carol": ["acme-publishers", "acme-consumers", "unrelated"],
    "dave": ["unrelated"],
    "erin": ["acme-consumers", "globex-consumers"],
    "frank": ["ghost-team"],
}
REDIRECT = "http://127.0.0.1:9/auth/oidc/callback"


@pytest.fixture
def provider(clock: ManualClock) -> Iterator[LocalProvider]:
    """The provider issues its tokens at the platform's time: an expiry the test passes
    with ``clock.advance`` does not depend on how long the world took to build."""
    started = LocalProvider(
        users={k: list(v) for k, v in USERS.items()}, now=lambda: clock.now().timestamp()
    ).start()
    yield started
    started.stop()


@pytest.fixture
def settings(settings: Settings, provider: LocalProvider) -> Settings:
    return settings.model_copy(
        update={
            "oidc_issuer": provider.issuer,
            "oidc_audience": AUDIENCE,
            "oidc_client_id": CLIENT_ID,
            "oidc_group_roles": GROUP_ROLES,
        }
    )


def refusal(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json().get("code", "")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# ---- bearer tokens on the API


def test_a_jwt_is_a_member_of_the_mapped_tenant_with_its_roles(
    world: World, provider: LocalProvider
) -> None:
    alice = bearer(provider.token("alice"))
    me = world.client.get("/api/tenants/acme", headers=alice)
    assert me.status_code == 200, me.text
    assert infer(world, alice).status_code == 200  # a consumer may call on /v2
    assert world.client.get("/v1/models", headers=alice).status_code == 200
    assert publish(world, alice).status_code == 403  # ... and not publish
    assert world.client.get("/api/tenants/globex", headers=alice).status_code in (403, 404)
    bob = bearer(provider.token("bob"))  # billing: reads usage, may not call
    assert world.client.get("/api/usage", headers=bob).status_code == 200
    assert infer(world, bob).status_code == 403
    carol = bearer(provider.token("carol"))  # the union of her mapped groups' roles
    assert publish(world, carol).status_code == 201
    assert infer(world, carol).status_code == 200
    # Audited under the subject's principal id, as a key's member would be.
    audit = world.client.get("/api/audit", params={"actor": "acme/oidc:carol"}, headers=ADMIN)
    assert audit.status_code == 200, audit.text
    events = audit.json()["items"]
    assert events and all(e["key_id"] is None for e in events)
    assert any(e["method"] == "POST" and e["status"] == 201 for e in events)
    denied = world.client.get("/api/audit", params={"actor": "acme/oidc:alice"}, headers=ADMIN)
    assert any(e["status"] == 403 for e in denied.json()["items"])  # her refused publish


def test_the_principal_is_the_subject_in_its_tenant(world: World, provider: LocalProvider) -> None:
    principal = world.services.authenticator.authenticate(provider.token("carol"))
    assert principal.id == "acme/oidc:carol"
    assert principal.tenant == "acme"
    assert principal.roles == {"publisher", "consumer"}
    assert principal.key_id is None and principal.scopes is None


def test_expired_tokens_are_refused(
    world: World, provider: LocalProvider, clock: ManualClock
) -> None:
    stale = provider.token("alice", lifetime=-120)
    response = world.client.get("/api/models", headers=bearer(stale))
    assert refusal(response) == (401, "token_expired")
    assert response.headers["www-authenticate"].startswith("Bearer")
    fresh = provider.token("alice", lifetime=60)
    assert world.client.get("/api/models", headers=bearer(fresh)).status_code == 200
    clock.advance(60 + 30 + 1)  # past expiry and the leeway
    assert refusal(world.client.get("/api/models", headers=bearer(fresh))) == (401, "token_expired")
    assert refusal(infer(world, bearer(fresh))) == (401, "token_expired")


def test_forged_tokens_are_refused(world: World, provider: LocalProvider) -> None:
    genuine = provider.token("alice")
    header, payload, signature = genuine.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    # Another key under the provider's key id.
    impostor = rsa_key(provider.key.kid or "k1")
    other_key = provider.token("alice", key=impostor)
    # The payload altered (more groups) under the genuine signature.
    altered = b64(json.dumps({**claims, "groups": ["acme-publishers"]}).encode())
    # No signature at all.
    none_header = b64(json.dumps({"alg": "none", "kid": provider.key.kid}).encode())
    unsigned = f"{none_header}.{payload}."
    # HMAC keyed with the provider's public key (the classic algorithm confusion).
    public_pem = provider.key.as_pem(private=False)
    hs_header = b64(json.dumps({"alg": "HS256", "kid": provider.key.kid}).encode())
    mac = hmac.new(public_pem, f"{hs_header}.{payload}".encode(), hashlib.sha256).digest()
    confused = f"{hs_header}.{payload}.{b64(mac)}"
    garbage = "not.a.jwt"
    for forged in (other_key, f"{header}.{altered}.{signature}", unsigned, confused, garbage):
        for response in (
            world.client.get("/api/models", headers=bearer(forged)),
            infer(world, bearer(forged)),
        ):
            assert response.status_code == 401, (forged, response.text)
        assert refusal(world.client.get("/api/models", headers=bearer(forged))) == (
            401,
            "token_invalid",
        )
    assert world.client.get("/api/models", headers=bearer(genuine)).status_code == 200


def test_wrong_audience_or_issuer_is_refused(world: World, provider: LocalProvider) -> None:
    for token, code in (
        (provider.token("alice", audience="another-api"), "token_audience"),
        (provider.token("alice", issuer="https://evil.example"), "token_issuer"),
    ):
        assert refusal(world.client.get("/api/models", headers=bearer(token))) == (401, code)


def test_missing_subject_and_future_tokens_are_refused(
    world: World, provider: LocalProvider
) -> None:
    no_subject = provider.token("alice", sub=None)
    not_yet = provider.token("alice", nbf=int(time.time()) + 600)
    issued_later = provider.token("alice", iat=int(time.time()) + 600)
    for token in (no_subject, not_yet, issued_later):
        response = world.client.get("/api/models", headers=bearer(token))
        assert refusal(response) == (401, "token_invalid"), response.text


def test_subjects_without_one_mapped_tenant_are_refused(
    world: World, provider: LocalProvider
) -> None:
    for subject, code in (
        ("dave", "oidc_unmapped"),
        ("nobody", "oidc_unmapped"),
        ("erin", "oidc_tenant_ambiguous"),
        ("frank", "oidc_tenant_unknown"),
    ):
        token = bearer(provider.token(subject))
        assert refusal(world.client.get("/api/models", headers=token)) == (403, code), subject
        assert infer(world, token).status_code == 403


def test_a_suspended_tenants_people_are_refused_until_it_is_reactivated(
    world: World, provider: LocalProvider
) -> None:
    alice = bearer(provider.token("alice"))
    assert world.client.get("/api/tenants/acme", headers=alice).status_code == 200  # known
    world.services.tenancy.suspend_tenant("acme", reason="unpaid")
    refused = world.client.get("/api/tenants/acme", headers=alice)
    assert refusal(refused) == (403, "tenant_suspended")
    assert refusal(infer(world, alice)) == (403, "tenant_suspended")
    fresh = bearer(provider.token("carol"))  # a token not seen before
    assert refusal(world.client.get("/api/models", headers=fresh)) == (403, "tenant_suspended")
    world.services.tenancy.reactivate_tenant("acme")
    assert world.client.get("/api/tenants/acme", headers=alice).status_code == 200


def test_an_unknown_key_id_fetches_the_keys_once(
    world: World, provider: LocalProvider, clock: ManualClock
) -> None:
    before = provider.token("alice")
    assert world.client.get("/api/models", headers=bearer(before)).status_code == 200
    assert provider.jwks_reads == 1
    assert world.client.get("/api/models", headers=bearer(before)).status_code == 200
    assert provider.jwks_reads == 1  # cached
    clock.advance(31)  # the last read is older than the refresh bound
    provider.rotate("k2")
    after = provider.token("alice")
    assert world.client.get("/api/models", headers=bearer(after)).status_code == 200
    assert provider.jwks_reads == 2
    # The rotated-out key is gone from the JWKS: its tokens no longer verify.
    assert refusal(world.client.get("/api/models", headers=bearer(before))) == (
        401,
        "token_invalid",
    )
    # Unknown key ids right after a read do not make the platform read again.
    for n in range(3):
        forged = provider.token("alice", key=rsa_key(f"made-up-{n}"))
        assert refusal(world.client.get("/api/models", headers=bearer(forged))) == (
            401,
            "token_invalid",
        )
    assert provider.jwks_reads == 2


def test_es256_tokens_verify(world: World, provider: LocalProvider) -> None:
    provider.rotate("e1", curve=True)
    token = provider.token("alice")
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["alg"] == "ES256"
    assert infer(world, bearer(token)).status_code == 200
    forged = provider.token("alice", key=ec_key("e1"))
    assert refusal(world.client.get("/api/models", headers=bearer(forged))) == (
        401,
        "token_invalid",
    )


def test_api_keys_still_work_beside_jwts(world: World, provider: LocalProvider) -> None:
    assert infer(world, world.key("acme", "consumer")).status_code == 200
    assert infer(world, bearer(provider.token("alice"))).status_code == 200


# ---- signing a person in (authorization code with PKCE)


def authorize(pending: AuthorizationRequest) -> dict[str, str]:
    """The browser's part: follow the authorization URL to the redirect back."""
    response = httpx.get(pending.url, follow_redirects=False)
    assert response.status_code == 302, response.text
    location = urlparse(response.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    return {k: v[0] for k, v in parse_qs(location.query).items()}


def oidc_client(world: World) -> OidcClient:
    assert world.services.oidc is not None
    return world.services.oidc


def test_sign_in_with_pkce(world: World, provider: LocalProvider) -> None:
    client = oidc_client(world)
    provider.signed_in = "carol"
    pending = client.begin(REDIRECT)
    query = parse_qs(urlparse(pending.url).query)
    assert query["code_challenge_method"] == ["S256"]
    assert query["code_challenge"] != [pending.code_verifier]
    assert query["nonce"] == [pending.nonce] and query["state"] == [pending.state]
    back = authorize(pending)
    signed_in = client.complete(pending, code=back["code"], state=back["state"])
    assert signed_in.subject == "carol"
    assert set(signed_in.groups) == set(USERS["carol"])
    assert signed_in.principal.tenant == "acme"
    assert signed_in.principal.roles == {"publisher", "consumer"}
    assert signed_in.claims["nonce"] == pending.nonce
    # The token for the API: the access token (audience: the API), not the id token.
    assert signed_in.api_token is not None
    claims = json.loads(base64.urlsafe_b64decode(signed_in.api_token.split(".")[1] + "=="))
    assert claims["aud"] == AUDIENCE
    assert world.services.authenticator.authenticate(signed_in.api_token).id == "acme/oidc:carol"


def test_sign_in_refuses_a_wrong_state_and_a_replayed_code(
    world: World, provider: LocalProvider
) -> None:
    client = oidc_client(world)
    pending = client.begin(REDIRECT)
    back = authorize(pending)
    with pytest.raises(Unauthenticated) as wrong_state:
        client.complete(pending, code=back["code"], state="someone-elses")
    assert wrong_state.value.code == "oidc_state_mismatch"
    assert client.complete(pending, code=back["code"], state=back["state"]).subject == "alice"
    with pytest.raises(Unauthenticated) as replayed:
        client.complete(pending, code=back["code"], state=back["state"])
    assert replayed.value.code == "oidc_code_rejected"


def test_sign_in_needs_the_code_verifier_and_the_nonce_of_this_sign_in(
    world: World, provider: LocalProvider
) -> None:
    client = oidc_client(world)
    pending = client.begin(REDIRECT)
    back = authorize(pending)
    other = client.begin(REDIRECT)
    # Someone holding the code but not this browser's verifier cannot redeem it.
    stolen = AuthorizationRequest(
        pending.url, pending.state, pending.nonce, other.code_verifier, REDIRECT
    )
    with pytest.raises(Unauthenticated) as refused:
        client.complete(stolen, code=back["code"], state=back["state"])
    assert refused.value.code == "oidc_code_rejected"
    # An id token minted for another sign-in (its nonce) is refused.
    pending = client.begin(REDIRECT)
    back = authorize(pending)
    mixed = AuthorizationRequest(
        pending.url, pending.state, other.nonce, pending.code_verifier, REDIRECT
    )
    with pytest.raises(Unauthenticated) as wrong_nonce:
        client.complete(mixed, code=back["code"], state=back["state"])
    assert wrong_nonce.value.code == "token_invalid"


def test_sign_in_of_an_unmapped_subject_is_refused(world: World, provider: LocalProvider) -> None:
    client = oidc_client(world)
    provider.signed_in = "dave"
    pending = client.begin(REDIRECT)
    back = authorize(pending)
    with pytest.raises(Forbidden) as refused:
        client.complete(pending, code=back["code"], state=back["state"])
    assert refused.value.code == "oidc_unmapped"


# ---- settings and an unreachable provider


def test_an_unknown_role_in_the_mapping_refuses_to_start(settings: Settings) -> None:
    bad = settings.model_copy(update={"oidc_group_roles": {"g": "acme:superuser"}})
    with pytest.raises(InvalidInput) as refused:
        build_services(bad)
    assert refused.value.code == "invalid_oidc_group_roles"


def test_oidc_without_its_extra_refuses_to_start(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.startswith("modelport.tenancy.oidc")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "joserfc", None)  # as if not installed
    with pytest.raises(InvalidInput) as refused:
        build_services(settings)
    assert refused.value.code == "oidc_extra_missing"
    assert "modelport[oidc]" in str(refused.value)


def test_malformed_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    monkeypatch.setenv("MODELPORT_OIDC_GROUP_ROLES", '{"g": "acme"}')
    with pytest.raises(ValidationError, match="tenant:role"):
        Settings()
    monkeypatch.delenv("MODELPORT_OIDC_GROUP_ROLES")
    monkeypatch.setenv("MODELPORT_OIDC_ISSUER", "https://id.example")
    with pytest.raises(ValidationError, match="MODELPORT_OIDC_AUDIENCE"):
        Settings()
    monkeypatch.setenv("MODELPORT_OIDC_CLIENT_ID", "c")
    assert Settings().oidc.resolved_audience == "c"


def test_an_unreachable_provider_is_unavailable_not_an_error(
    settings: Settings, provider: LocalProvider
) -> None:
    token = provider.token("alice")
    gone = settings.model_copy(update={"oidc_issuer": f"http://127.0.0.1:{free_port()}"})
    services = build_services(gone)
    try:
        with pytest.raises(Unavailable) as refused:
            services.authenticator.authenticate(token)
        assert refused.value.code == "oidc_unavailable"
    finally:
        services.close()


def test_refusals_are_logged_without_the_token(
    world: World, provider: LocalProvider, caplog: pytest.LogCaptureFixture
) -> None:
    stale = provider.token("alice", lifetime=-120)
    unmapped = provider.token("dave")
    with caplog.at_level("WARNING", logger="modelport.tenancy.authn"):
        world.client.get("/api/models", headers=bearer(stale))
        world.client.get("/api/models", headers=bearer(unmapped))
    refused = [r for r in caplog.records if getattr(r, "event", None) == "login.refused"]
    fields = [r.fields for r in refused]  # type: ignore[attr-defined]
    assert [f["code"] for f in fields] == ["token_expired", "oidc_unmapped"]
    assert all(f["via"] == "jwt" for f in fields)
    assert not any(stale in r.getMessage() or unmapped in r.getMessage() for r in caplog.records)


# ---- the sign-in routes


def browse_to_provider(world: World) -> tuple[str, str]:
    """``/auth/oidc/login`` → the provider → the callback path it redirects back to;
    also the login response's Set-Cookie header."""
    login = world.client.get("/auth/oidc/login", follow_redirects=False)
    assert login.status_code == 302, login.text
    back = httpx.get(login.headers["location"], follow_redirects=False)
    assert back.status_code == 302, back.text
    location = urlparse(back.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == (
        "http://testserver/auth/oidc/callback"
    )
    return f"{location.path}?{location.query}", login.headers["set-cookie"]


def test_the_sign_in_routes(world: World, provider: LocalProvider) -> None:
    provider.signed_in = "carol"
    callback, cookie = browse_to_provider(world)
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=lax", "path=/auth/oidc"} <= attributes
    assert "code_verifier" not in cookie and "mp_live_" not in cookie
    response = world.client.get(callback)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "principal": "acme/oidc:carol",
        "tenant": "acme",
        "roles": ["consumer", "publisher"],
        "subject": "carol",
        "groups": USERS["carol"],
    }
    # The cookie is cleared: the same callback again has no sign-in under way.
    assert refusal(world.client.get(callback)) == (401, "oidc_state_mismatch")
    paths = world.client.get("/api/openapi.json").json()["paths"]
    assert not any(path.startswith("/auth/") for path in paths)


def test_the_callback_refuses_another_browser_a_forged_cookie_and_a_denial(
    world: World, provider: LocalProvider
) -> None:
    callback, _ = browse_to_provider(world)
    sealed = world.client.cookies.get("modelport_oidc")
    assert sealed
    world.client.cookies.clear()  # another browser: it never began this sign-in
    assert refusal(world.client.get(callback)) == (401, "oidc_state_mismatch")
    tampered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    world.client.cookies.set("modelport_oidc", tampered, path="/auth/oidc")
    assert refusal(world.client.get(callback)) == (401, "oidc_state_mismatch")
    world.client.cookies.set("modelport_oidc", sealed, path="/auth/oidc")
    wrong_state = callback.replace("state=", "state=x")
    assert refusal(world.client.get(wrong_state)) == (401, "oidc_state_mismatch")
    denied = world.client.get("/auth/oidc/callback?error=access_denied&state=s")
    assert refusal(denied) == (401, "oidc_denied")
    assert refusal(world.client.get("/auth/oidc/callback")) == (400, "oidc_callback_invalid")
    assert world.client.get(callback).status_code == 200  # this browser, at last


def test_a_confidential_client_sends_its_secret(
    world: World, settings: Settings, provider: LocalProvider
) -> None:
    provider.client_secret = "s3cret-of-the-client"
    for secret, works in (("s3cret-of-the-client", True), ("a-wrong-one", False), (None, False)):
        configured = settings.model_copy(
            update={"oidc_client_secret": SecretStr(secret) if secret else None}
        )
        assert "s3cret" not in repr(configured)
        services = build_services(configured)
        try:
            client = services.oidc
            assert client is not None
            pending = client.begin(REDIRECT)
            back = authorize(pending)
            if works:
                signed_in = client.complete(pending, code=back["code"], state=back["state"])
                assert signed_in.principal.id == "acme/oidc:alice"
            else:
                with pytest.raises(Unauthenticated) as refused:
                    client.complete(pending, code=back["code"], state=back["state"])
                assert refused.value.code == "oidc_code_rejected"
        finally:
            services.close()
