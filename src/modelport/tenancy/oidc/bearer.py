"""A provider's JWT as a bearer credential on ``/api``, ``/v2`` and ``/v1``.

``OidcBearer.authenticate`` verifies the token (``TokenVerifier``), maps its groups to a
tenant and roles (``GroupRoles``), checks the tenant exists and is not suspended, and
yields the same
``Principal`` an API key does: every authorization check applies unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from modelport.errors import Forbidden
from modelport.tenancy.authn import tenant_suspended
from modelport.tenancy.oidc.mapping import GroupRoles, groups_of, oidc_principal
from modelport.tenancy.oidc.tokens import TokenVerifier, VerifiedToken
from modelport.tenancy.types import Principal, Tenant


class OidcBearer:
    """Turns a verified provider token into a tenant member's principal (thread-safe)."""

    def __init__(
        self,
        verifier: TokenVerifier,
        group_roles: GroupRoles,
        groups_claim: str,
        find_tenant: Callable[[str], Tenant | None],
        *,
        can_remember: Callable[[], bool] = lambda: True,
    ) -> None:
        """``find_tenant``: the tenant of a slug, None where there is none.
        ``can_remember``: whether ``forget`` would be called now for a tenant suspended
        elsewhere (else every token's tenant is read afresh)."""
        self.verifier = verifier
        self.group_roles = group_roles
        self.groups_claim = groups_claim
        self._find_tenant = find_tenant
        self._can_remember = can_remember
        # Active tenants seen: no second query until one is forgotten (a suspension).
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def forget(self, tenant: str) -> None:
        """Read this tenant afresh on its next token (its state changed)."""
        with self._lock:
            self._known.discard(tenant)

    def clear(self) -> None:
        with self._lock:
            self._known.clear()

    def authenticate(self, token: str) -> Principal:
        return self.principal(self.verifier.verify(token))

    def authenticate_cached(self, token: str) -> Principal | None:
        """Like ``authenticate``, but None where that would need the provider or the database."""
        verified = self.verifier.verify_cached(token)
        if verified is None:
            return None
        tenant, _ = self.group_roles.tenant_roles(groups_of(verified.claims, self.groups_claim))
        with self._lock:
            if tenant not in self._known:
                return None
        return self.principal(verified)

    def principal(self, verified: VerifiedToken) -> Principal:
        """The principal of a verified token (an access token, or a sign-in's id token)."""
        groups = groups_of(verified.claims, self.groups_claim)
        tenant, roles = self.group_roles.tenant_roles(groups)
        self._check_tenant(tenant)
        return oidc_principal(tenant, verified.subject, roles)

    def _check_tenant(self, tenant: str) -> None:
        with self._lock:
            if tenant in self._known:
                return
        remember = self._can_remember()
        found = self._find_tenant(tenant)
        if found is None:
            raise Forbidden(
                f"your groups map to tenant {tenant!r}, which does not exist",
                code="oidc_tenant_unknown",
            )
        if found.suspended:
            raise tenant_suspended(tenant)
        if remember:
            with self._lock:
                self._known.add(tenant)
