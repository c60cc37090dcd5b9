"""A sign-in under way, sealed for the browser that began it (a cookie), for a while.

Encrypted and authenticated (Fernet, under a key derived from the platform's secret
key), so the browser can neither read the code verifier and nonce nor forge a pending
sign-in; it expires after ``ttl_seconds`` (Fernet's timestamp).
"""

from __future__ import annotations

import base64
import json

from cryptography.fernet import Fernet, InvalidToken

from modelport.errors import Unauthenticated
from modelport.tenancy.oidc.client import AuthorizationRequest


def no_sign_in() -> Unauthenticated:
    return Unauthenticated(
        "no sign-in of this browser is under way (or it expired): start again",
        code="oidc_state_mismatch",
    )


class PendingSignIns:
    """Seals an ``AuthorizationRequest`` into a string and opens it again."""

    def __init__(self, key: bytes, *, ttl_seconds: int) -> None:
        """``key``: 32 bytes (e.g. ``SecretBox.derive``)."""
        self._fernet = Fernet(base64.urlsafe_b64encode(key[:32]))
        self.ttl_seconds = ttl_seconds

    def seal(self, pending: AuthorizationRequest) -> str:
        fields = [pending.url, pending.state, pending.nonce, pending.code_verifier]
        plain = json.dumps([*fields, pending.redirect_uri])
        return self._fernet.encrypt(plain.encode()).decode("ascii")

    def open(self, sealed: str | None) -> AuthorizationRequest:
        if not sealed:
            raise no_sign_in()
        try:
            plain = self._fernet.decrypt(sealed.encode("ascii"), ttl=self.ttl_seconds)
            url, state, nonce, verifier, redirect_uri = json.loads(plain)
        except (InvalidToken, UnicodeError, ValueError) as exc:
            raise no_sign_in() from exc
        return AuthorizationRequest(url, state, nonce, verifier, redirect_uri)
