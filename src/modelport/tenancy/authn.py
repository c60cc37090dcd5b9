"""Bearer token → principal: the operator's admin key, a tenant's API key, or (when
OpenID Connect is configured) a JWT of the identity provider (``tenancy.oidc``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from modelport.errors import Forbidden, Unauthenticated
from modelport.logs import log_event
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.tenancy import repository as repo
from modelport.tenancy.admin import AdminKeyAuthenticator
from modelport.tenancy.invalidation import Invalidation
from modelport.tenancy.keycache import KeyCache
from modelport.tenancy.keys import parse_key, secret_matches
from modelport.tenancy.types import Principal, principal_id

if TYPE_CHECKING:
    from modelport.tenancy.oidc import OidcBearer

log = logging.getLogger(__name__)


def invalid_credentials() -> Unauthenticated:
    return Unauthenticated("invalid API key", code="invalid_credentials")


def tenant_suspended(tenant: str) -> Forbidden:
    return Forbidden(
        f"tenant {tenant} is suspended: ask the platform's operator",
        code="tenant_suspended",
        tenant=tenant,
    )


class Authenticator:
    """Authenticates a bearer token; key credentials come from the cache when they can."""

    def __init__(
        self,
        admin: AdminKeyAuthenticator,
        database: Database,
        cache: KeyCache,
        invalidation: Invalidation,
        *,
        clock: Callable[[], datetime] = utcnow,
        oidc: OidcBearer | None = None,
    ) -> None:
        """``oidc``: accepts the identity provider's JWTs too; None refuses them as
        invalid keys."""
        self.admin = admin
        self.oidc = oidc
        self.database = database
        self.cache = cache
        self.invalidation = invalidation
        self._clock = clock

    def authenticate(self, token: str | None) -> Principal:
        principal = self._authenticate(token, cached_only=False)
        assert principal is not None
        return principal

    def authenticate_cached(self, token: str | None) -> Principal | None:
        """Like ``authenticate``, but None where that would need the database (for async
        callers, which then authenticate in a worker thread)."""
        return self._authenticate(token, cached_only=True)

    def _authenticate(self, token: str | None, *, cached_only: bool) -> Principal | None:
        try:
            return self._check(token, cached_only=cached_only)
        except (Unauthenticated, Forbidden) as exc:
            # Never the token: only the key id it names (public: in every listing).
            parsed = parse_key(token) if token else None
            via = "jwt" if token and parsed is None and _looks_like_jwt(token) else "key"
            log_event(
                log,
                "login.refused",
                level=logging.WARNING,
                code=exc.code,
                key_id=parsed.key_id if parsed else None,
                via=via,
            )
            raise

    def _check(self, token: str | None, *, cached_only: bool) -> Principal | None:
        if not token:
            raise Unauthenticated("missing bearer token", code="missing_credentials")
        if self.admin.matches(token):
            return self.admin.principal
        parsed = parse_key(token)
        if parsed is None:
            if self.oidc is not None and _looks_like_jwt(token):
                if cached_only:
                    return self.oidc.authenticate_cached(token)
                return self.oidc.authenticate(token)
            raise invalid_credentials()
        if cached_only:
            credential = self.cache.get(parsed.key_id)
            if credential is None:
                return None
        else:
            credential = self.credential(parsed.key_id)
        if credential is None or not secret_matches(
            parsed.key_id, parsed.secret, credential.secret_hash
        ):
            raise invalid_credentials()
        # Past this point the caller holds the real secret: say why it no longer works.
        if credential.revoked:
            raise Unauthenticated("this API key has been revoked", code="key_revoked")
        if credential.expires_at is not None and credential.expires_at <= self._clock():
            raise Unauthenticated("this API key has expired", code="key_expired")
        if credential.tenant_suspended:
            raise tenant_suspended(credential.tenant)
        return Principal(
            id=principal_id(credential.tenant, credential.member),
            roles=credential.roles,
            tenant=credential.tenant,
            key_id=credential.key_id,
            scopes=credential.scopes,
            kind=credential.kind,
        )

    def credential(self, key_id: str) -> repo.KeyCredential | None:
        cached = self.cache.get(key_id)
        if cached is not None:
            return cached
        generation = self.cache.generation
        with self.database.transaction() as session:
            found = repo.credential(session, key_id)
        if found is not None and self.invalidation.can_cache():
            self.cache.put(found, generation)
        return found


def _looks_like_jwt(token: str) -> bool:
    """A JWS in compact form: three dot-separated parts."""
    return token.count(".") == 2
