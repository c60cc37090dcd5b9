"""The platform operator's break-glass credential."""

from __future__ import annotations

import hmac
import secrets

from modelport.config import MIN_ADMIN_KEY_LENGTH
from modelport.errors import InvalidInput, Unauthenticated
from modelport.tenancy.types import Principal

ADMIN = Principal(id="admin", roles=frozenset({"admin"}))


def generate_admin_key() -> str:
    return "mp_admin_" + secrets.token_urlsafe(32)


def check_admin_key(key: str) -> str:
    """Refuse an empty or short key (the server will not start with one)."""
    if len(key) < MIN_ADMIN_KEY_LENGTH:
        raise InvalidInput(
            f"MODELPORT_ADMIN_KEY must be at least {MIN_ADMIN_KEY_LENGTH} characters "
            "(or start with --dev to generate one)",
            code="weak_admin_key",
        )
    return key


class AdminKeyAuthenticator:
    """Turns a bearer token into a principal; constant-time comparison."""

    principal = ADMIN

    def __init__(self, admin_key: str) -> None:
        self._key = check_admin_key(admin_key).encode()

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self._key)

    def authenticate(self, token: str | None) -> Principal:
        if not token:
            raise Unauthenticated("missing bearer token", code="missing_credentials")
        if not self.matches(token):
            raise Unauthenticated("invalid API key", code="invalid_credentials")
        return ADMIN
