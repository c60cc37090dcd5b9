"""Signing people in: the authorization code flow with PKCE (RFC 7636) and a nonce.

Call order: ``begin(redirect_uri)`` → send the person to ``AuthorizationRequest.url`` and
keep the request (state, nonce, code verifier) where only their browser can present it
again (a signed, HTTP-only cookie) → the provider redirects back with ``code`` and
``state`` → ``complete(pending, code=..., state=...)`` exchanges the code at the token
endpoint, verifies the id token (signature, issuer, audience = this client, expiry,
nonce) and maps the subject's groups to a tenant member (``SignIn.principal``).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from modelport.errors import Unauthenticated
from modelport.tenancy.oidc.bearer import OidcBearer
from modelport.tenancy.oidc.mapping import groups_of
from modelport.tenancy.oidc.provider import Provider, provider_unavailable
from modelport.tenancy.oidc.tokens import TokenVerifier
from modelport.tenancy.types import Principal

if TYPE_CHECKING:
    from modelport.tenancy.oidc.pending import PendingSignIns

SCOPES = "openid profile email"


@dataclass(frozen=True)
class AuthorizationRequest:
    """One sign-in under way: secret to the person's browser until it comes back."""

    url: str
    """Where to send the person (the provider's authorization endpoint)."""
    state: str
    nonce: str
    code_verifier: str
    redirect_uri: str


@dataclass(frozen=True)
class SignIn:
    """A completed sign-in."""

    subject: str
    groups: tuple[str, ...]
    principal: Principal
    claims: Mapping[str, Any]
    """The id token's verified claims."""
    api_token: str | None = None
    """A token of this sign-in the API accepts as a bearer credential (its audience):
    the access token where it is such a JWT for the same subject, else the id token
    where the API's audience is this client's id; None when neither is."""


class OidcClient:
    """This platform as an OpenID Connect relying party (thread-safe)."""

    def __init__(
        self,
        provider: Provider,
        id_tokens: TokenVerifier,
        bearer: OidcBearer,
        client_id: str,
        client_secret: str | None = None,
        pending: PendingSignIns | None = None,
    ) -> None:
        """``id_tokens`` verifies with this client's id as the audience; ``bearer`` maps
        the subject's groups to a tenant member; ``pending`` seals sign-ins under way
        for the browser (None where the platform has no secret key)."""
        self.pending = pending
        self.provider = provider
        self.id_tokens = id_tokens
        self.bearer = bearer
        self.client_id = client_id
        self._client_secret = client_secret

    def begin(self, redirect_uri: str) -> AuthorizationRequest:
        state, nonce = generate_token(32), generate_token(32)
        verifier = generate_token(64)  # RFC 7636: 43 to 128 characters
        url = prepare_grant_uri(
            self.provider.metadata().authorization_endpoint,
            client_id=self.client_id,
            response_type="code",
            redirect_uri=redirect_uri,
            scope=SCOPES,
            state=state,
            nonce=nonce,
            code_challenge=create_s256_code_challenge(verifier),
            code_challenge_method="S256",
        )
        return AuthorizationRequest(url, state, nonce, verifier, redirect_uri)

    def complete(self, pending: AuthorizationRequest, *, code: str, state: str) -> SignIn:
        # The state ties the redirect to the browser that began it (CSRF on sign-in).
        if not hmac.compare_digest(state.encode(), pending.state.encode()):
            raise Unauthenticated(
                "the sign-in's state does not match the one this browser began",
                code="oidc_state_mismatch",
            )
        tokens = self._exchange(pending, code)
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise Unauthenticated("the provider returned no id token", code="token_invalid")
        verified = self.id_tokens.verify(id_token, nonce=pending.nonce)
        return SignIn(
            subject=verified.subject,
            groups=groups_of(verified.claims, self.bearer.groups_claim),
            principal=self.bearer.principal(verified),
            claims=verified.claims,
            api_token=self._api_token(tokens.get("access_token"), id_token, verified.subject),
        )

    def _api_token(self, access_token: object, id_token: str, subject: str) -> str | None:
        """The first of the access and id tokens the bearer verifier accepts for
        ``subject`` (an opaque access token, or one for another audience, is skipped)."""
        for candidate in (access_token, id_token):
            if not isinstance(candidate, str) or candidate.count(".") != 2:
                continue
            try:
                accepted = self.bearer.verifier.verify(candidate)
            except Unauthenticated:
                continue
            if accepted.subject == subject:
                return candidate
        return None

    def _exchange(self, pending: AuthorizationRequest, code: str) -> dict[str, Any]:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "code_verifier": pending.code_verifier,
            "client_id": self.client_id,
        }
        endpoint = self.provider.metadata().token_endpoint
        try:
            if self._client_secret:  # a confidential client: client_secret_basic
                secret = httpx.BasicAuth(self.client_id, self._client_secret)
                response = self.provider.http.post(endpoint, data=form, auth=secret)
            else:  # a public client sends its id alone; PKCE binds the code to it
                response = self.provider.http.post(endpoint, data=form)
        except httpx.HTTPError as exc:
            raise provider_unavailable("token endpoint", exc) from exc
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code == 400 or response.status_code == 401:
            error = body.get("error") if isinstance(body, dict) else None
            raise Unauthenticated(
                f"the provider refused the authorization code ({error or response.status_code})",
                code="oidc_code_rejected",
            )
        if response.status_code != 200 or not isinstance(body, dict):
            raise provider_unavailable("token endpoint")
        return body
