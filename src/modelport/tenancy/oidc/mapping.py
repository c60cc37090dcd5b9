"""Provider groups → a tenant member with roles.

A subject signs in as member ``oidc:<sub>`` of the one tenant its mapped groups point
at, with the union of those groups' roles. No mapped group, or groups pointing at more
than one tenant, is refused (403): a principal belongs to exactly one tenant, and
guessing which would grant the wrong tenant's access.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from modelport.errors import Forbidden, InvalidInput
from modelport.tenancy.policy import TENANT_ROLES
from modelport.tenancy.types import MemberKind, Principal, principal_id

MEMBER_PREFIX = "oidc:"
"""Members signed in through the provider are named ``oidc:<subject>``."""


@dataclass(frozen=True)
class GroupRoles:
    """Which tenant role each provider group confers."""

    roles: Mapping[str, tuple[str, str]]
    """group → (tenant slug, role)."""

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> GroupRoles:
        """From ``{"group": "tenant:role"}``; an unknown role refuses to start."""
        parsed: dict[str, tuple[str, str]] = {}
        for group, target in raw.items():
            tenant, _, role = target.partition(":")
            if role not in TENANT_ROLES:
                raise InvalidInput(
                    f"MODELPORT_OIDC_GROUP_ROLES: group {group!r} maps to role {role!r}; "
                    f"roles are {', '.join(sorted(TENANT_ROLES))}",
                    code="invalid_oidc_group_roles",
                )
            parsed[group] = (tenant, role)
        return cls(MappingProxyType(parsed))

    def tenant_roles(self, groups: Iterable[str]) -> tuple[str, frozenset[str]]:
        """The tenant and roles ``groups`` confer; ``Forbidden`` if none, or several tenants."""
        targets = {self.roles[g] for g in groups if g in self.roles}
        if not targets:
            raise Forbidden(
                "none of your groups at the identity provider is mapped to a tenant role",
                code="oidc_unmapped",
            )
        tenants = {tenant for tenant, _ in targets}
        if len(tenants) > 1:
            raise Forbidden(
                f"your groups map to several tenants ({', '.join(sorted(tenants))}); "
                "a sign-in belongs to one",
                code="oidc_tenant_ambiguous",
            )
        return tenants.pop(), frozenset(role for _, role in targets)


def groups_of(claims: Mapping[str, object], claim: str) -> tuple[str, ...]:
    """The subject's groups from ``claim`` (a list of strings, or one string)."""
    value = claims.get(claim)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(g for g in value if isinstance(g, str))
    return ()


def oidc_principal(tenant: str, subject: str, roles: frozenset[str]) -> Principal:
    """The principal of a provider's subject: a member of ``tenant``, no API key, unscoped."""
    return Principal(
        id=principal_id(tenant, MEMBER_PREFIX + subject),
        roles=roles,
        tenant=tenant,
        key_id=None,
        scopes=None,
        kind=MemberKind.MEMBER.value,
    )
