"""Verifying the provider's JWTs: signature against its JWKS, then the claims.

Only asymmetric algorithms are accepted (RS*, PS*, ES*): ``none`` and HS* are refused
before any key is looked at, so a token "signed" with the provider's public key as an
HMAC secret cannot pass. Then ``iss``, ``aud``, ``exp`` (required), ``nbf`` and ``iat``
(when present, with a small leeway) and ``sub`` (required). Every refusal is
``Unauthenticated`` with a stable code: ``token_expired``, ``token_audience``,
``token_issuer`` or ``token_invalid``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import ClaimError, ExpiredTokenError, JoseError
from joserfc.jwk import KeySet

from modelport.errors import Unauthenticated
from modelport.tenancy.oidc.provider import KeyStore

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
"""What the provider may sign with: asymmetric only."""


def token_invalid(why: str) -> Unauthenticated:
    return Unauthenticated(f"invalid bearer token: {why}", code="token_invalid")


@dataclass(frozen=True)
class VerifiedToken:
    """A token whose signature and claims were verified."""

    subject: str
    claims: Mapping[str, Any]


def unverified_header(token: str) -> dict[str, Any]:
    """The JOSE header, read without verifying anything (to pick the key and refuse bad
    algorithms early)."""
    encoded = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (binascii.Error, ValueError) as exc:
        raise token_invalid("malformed header") from exc
    if not isinstance(header, dict):
        raise token_invalid("malformed header")
    return header


class TokenVerifier:
    """Verifies a JWT of the provider for ``audience`` (thread-safe)."""

    def __init__(
        self,
        issuer: str,
        audience: str,
        keys: KeyStore,
        *,
        leeway_seconds: int,
        now: Callable[[], float],
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys = keys
        self.leeway = leeway_seconds
        self._now = now

    def verify(self, token: str, *, nonce: str | None = None) -> VerifiedToken:
        """Verify ``token`` (fetching the provider's keys if needed); ``nonce``: the
        value an id token must carry (the sign-in flow's)."""
        kid = self._kid(token)
        return self._verify(token, self.keys.keys_for(kid), nonce)

    def verify_cached(self, token: str) -> VerifiedToken | None:
        """Like ``verify``, but None where that would need to fetch the provider's keys."""
        keys = self.keys.cached(self._kid(token))
        return None if keys is None else self._verify(token, keys, None)

    @staticmethod
    def _kid(token: str) -> str | None:
        header = unverified_header(token)
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise token_invalid(f"algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        return kid if isinstance(kid, str) else None

    def _verify(self, token: str, keys: KeySet, nonce: str | None) -> VerifiedToken:
        try:
            decoded = jwt.decode(token, keys, algorithms=list(ALGORITHMS))
        except JoseError as exc:
            raise token_invalid(exc.error) from exc
        claims = decoded.claims
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._now()),
            leeway=self.leeway,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.audience},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError as exc:
            raise Unauthenticated("the bearer token has expired", code="token_expired") from exc
        except ClaimError as exc:
            raise _claim_refusal(exc) from exc
        if nonce is not None and claims.get("nonce") != nonce:
            raise token_invalid("the id token's nonce does not match this sign-in")
        return VerifiedToken(subject=str(claims["sub"]), claims=claims)


def _claim_refusal(exc: ClaimError) -> Unauthenticated:
    if exc.claim == "aud":
        return Unauthenticated("the bearer token is not for this audience", code="token_audience")
    if exc.claim == "iss":
        return Unauthenticated("the bearer token is from another issuer", code="token_issuer")
    return token_invalid(f"claim {exc.claim!r}: {exc.description}")
