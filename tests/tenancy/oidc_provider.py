"""A real, local OpenID provider for tests: discovery, JWKS, an authorization endpoint
that approves its configured user at once, and a token endpoint that checks PKCE.

It signs with a generated RSA key through joserfc (authlib's JOSE library) and checks
code challenges with authlib's RFC 7636 code; it serves on a loopback port in a thread.
``rotate()`` replaces its signing key (the old one leaves the JWKS); ``jwks_reads``
counts how often its keys were read.
"""

from __future__ import annotations

import base64
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.conftest import ThreadedServer

CLIENT_ID = "modelport-console"
AUDIENCE = "modelport-api"


def rsa_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


def ec_key(kid: str) -> ECKey:
    return ECKey.generate_key("P-256", parameters={"kid": kid, "use": "sig", "alg": "ES256"})


@dataclass
class PendingCode:
    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str | None
    subject: str


@dataclass
class LocalProvider:
    """Start with ``start()``; ``issuer`` is its URL once started."""

    users: dict[str, list[str]] = field(default_factory=dict)
    """subject → groups."""
    signed_in: str = "alice"
    """Who the authorization endpoint approves."""
    client_secret: str | None = None
    """Set: the client is confidential and must authenticate with HTTP Basic."""
    key: RSAKey | ECKey = field(default_factory=lambda: rsa_key("k1"))
    token_lifetime: float = 300
    """How long the tokens its token endpoint issues live (seconds)."""
    now: Callable[[], float] = time.time
    """The time its tokens are issued at (a test that moves the platform's clock hands
    the provider the same one)."""
    jwks_reads: int = 0
    codes: dict[str, PendingCode] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> LocalProvider:
        self.server = ThreadedServer(self._app()).start()
        self.issuer = self.server.url
        return self

    def stop(self) -> None:
        self.server.stop()

    def rotate(self, kid: str, *, curve: bool = False) -> RSAKey | ECKey:
        """Sign with a new key (RSA, or P-256 with ``curve``) from now on; the old one
        leaves the JWKS."""
        self.key = ec_key(kid) if curve else rsa_key(kid)
        return self.key

    def token(
        self,
        subject: str = "alice",
        *,
        audience: str = AUDIENCE,
        issuer: str | None = None,
        lifetime: float = 300,
        key: RSAKey | ECKey | None = None,
        **claims: Any,
    ) -> str:
        """A token as the provider issues it (or, with other arguments, as a forger would)."""
        now = int(self.now())
        payload = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + int(lifetime),
            "groups": self.users.get(subject, []),
            **claims,
        }
        signer = key or self.key
        alg = "ES256" if isinstance(signer, ECKey) else "RS256"
        return jwt.encode({"alg": alg, "kid": signer.kid}, payload, signer)

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._discovery),
                Route("/jwks", self._jwks),
                Route("/authorize", self._authorize),
                Route("/token", self._token, methods=["POST"]),
            ]
        )

    async def _discovery(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def _jwks(self, request: Request) -> Response:
        with self._lock:
            self.jwks_reads += 1
        return JSONResponse(KeySet([self.key]).as_dict(private=False))

    async def _authorize(self, request: Request) -> Response:
        q = request.query_params
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        if "openid" not in q.get("scope", "").split() or not q.get("code_challenge"):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(24)
        with self._lock:
            self.codes[code] = PendingCode(
                client_id=q["client_id"],
                redirect_uri=q["redirect_uri"],
                challenge=q["code_challenge"],
                nonce=q.get("nonce"),
                subject=self.signed_in,
            )
        query = urlencode({"code": code, "state": q.get("state", "")})
        return RedirectResponse(f"{q['redirect_uri']}?{query}", status_code=302)

    async def _token(self, request: Request) -> Response:
        form = await request.form()
        with self._lock:
            # Single use: a replayed code is unknown by then (RFC 6749 4.1.2).
            pending = self.codes.pop(str(form.get("code", "")), None)
        verifier = str(form.get("code_verifier", ""))
        if self.client_secret is not None:
            expected = base64.b64encode(f"{CLIENT_ID}:{self.client_secret}".encode()).decode()
            if request.headers.get("authorization") != f"Basic {expected}":
                return JSONResponse({"error": "invalid_client"}, status_code=401)
        if (
            form.get("grant_type") != "authorization_code"
            or pending is None
            or form.get("client_id") != pending.client_id
            or form.get("redirect_uri") != pending.redirect_uri
            or create_s256_code_challenge(verifier) != pending.challenge
        ):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        extra: dict[str, Any] = {"nonce": pending.nonce} if pending.nonce else {}
        return JSONResponse(
            {
                "token_type": "Bearer",
                "expires_in": int(self.token_lifetime),
                "access_token": self.token(pending.subject, lifetime=self.token_lifetime),
                "id_token": self.token(
                    pending.subject,
                    audience=pending.client_id,
                    lifetime=self.token_lifetime,
                    **extra,
                ),
            }
        )
