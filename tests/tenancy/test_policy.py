"""The pure authorization rules: role table, resources, scopes, delegation, separation."""

from __future__ import annotations

import pytest

from modelport.tenancy.admin import ADMIN
from modelport.tenancy.policy import (
    ALL_PERMISSIONS,
    ROLE_PERMISSIONS,
    TENANT_ROLES,
    Decision,
    ModelResource,
    Namespace,
    Permission,
    Platform,
    TenantScoped,
    assignable_roles,
    authorize,
    delegable_scopes,
    may_issue_for,
    permissions_of,
    separation_forbids,
    transition_permission,
)
from modelport.tenancy.types import Principal

P = Permission
A, D, H = Decision.ALLOW, Decision.DENY, Decision.HIDE


def member(role: str, tenant: str = "acme", scopes: frozenset[str] | None = None) -> Principal:
    return Principal(
        id=f"{tenant}/{role}", roles=frozenset({role}), tenant=tenant, key_id="k", scopes=scopes
    )


OWN_PRIVATE = ModelResource("acme", "private")
OTHER_PRIVATE = ModelResource("globex", "private")
OTHER_PUBLIC = ModelResource("globex", "public")
OTHER_SHARED = ModelResource("globex", "private", shared=True)

# What each role may do on its own tenant's private model.
OWN_MODEL = {
    P.MODEL_READ: {"owner", "publisher", "approver", "deployer", "consumer", "billing"},
    P.MODEL_REGISTER: {"owner", "publisher"},
    P.VERSION_APPROVE: {"owner", "approver"},
    P.VERSION_DEPLOY: {"owner", "deployer"},
    P.VERSION_OVERRIDE: {"owner"},
    P.MODEL_CALL: {"owner", "consumer"},
}
# ... and on its own tenant's settings, members, keys, grants and audit log.
OWN_TENANT = {
    P.TENANT_READ: {"owner", "publisher", "approver", "deployer", "consumer", "billing"},
    P.TENANT_MANAGE: {"owner"},
    P.MEMBERS_READ: {"owner"},
    P.MEMBERS_MANAGE: {"owner"},
    P.KEYS_MANAGE: {"owner"},
    P.GRANTS_READ: {"owner"},
    P.GRANTS_MANAGE: {"owner"},
    P.AUDIT_READ: {"owner"},
    P.USAGE_READ: {"owner", "billing"},
    P.USAGE_AUTHORIZE: {"owner", "billing"},
}


@pytest.mark.parametrize("role", sorted(TENANT_ROLES))
def test_every_role_on_its_own_tenant(role: str) -> None:
    principal = member(role)
    for permission, allowed in OWN_MODEL.items():
        want = A if role in allowed else D
        assert authorize(principal, permission, OWN_PRIVATE) is want, (role, permission)
    for permission, allowed in OWN_TENANT.items():
        want = A if role in allowed else D
        assert authorize(principal, permission, TenantScoped("acme")) is want, (role, permission)
    assert authorize(principal, P.PLATFORM_MANAGE, Platform()) is D
    want_register = A if role in OWN_MODEL[P.MODEL_REGISTER] else D
    assert authorize(principal, P.MODEL_REGISTER, Namespace("acme")) is want_register


@pytest.mark.parametrize("role", sorted(TENANT_ROLES))
def test_every_role_on_another_tenant(role: str) -> None:
    principal = member(role)
    for permission in ALL_PERMISSIONS:
        # Another tenant's private things: not even their existence.
        assert authorize(principal, permission, OTHER_PRIVATE) is H
        assert authorize(principal, permission, TenantScoped("globex")) is H
        # Creating in another namespace: refused (there is nothing to hide).
        assert authorize(principal, permission, Namespace("globex")) is D
        # Public or shared models: at most read and call, as the caller's roles allow.
        for resource in (OTHER_PUBLIC, OTHER_SHARED):
            held = permission in ROLE_PERMISSIONS[role]
            cross = permission in (P.MODEL_READ, P.MODEL_CALL)
            assert authorize(principal, permission, resource) is (A if held and cross else D)


def test_the_admin_may_do_everything_everywhere() -> None:
    for permission in ALL_PERMISSIONS:
        for resource in (Platform(), TenantScoped("x"), Namespace("x"), OTHER_PRIVATE):
            assert authorize(ADMIN, permission, resource) is A


def test_an_admin_role_member_is_limited_by_its_key_scopes() -> None:
    def root(*scopes: str) -> Principal:
        return Principal(
            id="ops/root", roles=frozenset({"admin"}), tenant="ops", scopes=frozenset(scopes)
        )

    # Platform-wide reach comes with platform.manage; the scopes still bound what it does.
    reach = root("platform.manage", "model.read")
    assert authorize(reach, P.MODEL_READ, OTHER_PRIVATE) is A
    assert authorize(reach, P.MODEL_REGISTER, OTHER_PRIVATE) is D
    # Without platform.manage the key is an ordinary member of its own tenant.
    plain = root("model.read")
    assert authorize(plain, P.MODEL_READ, OTHER_PRIVATE) is H
    assert authorize(plain, P.MODEL_READ, OTHER_PUBLIC) is A
    assert authorize(plain, P.PLATFORM_MANAGE, Platform()) is D


def test_scopes_narrow_but_never_widen() -> None:
    narrowed = member("owner", scopes=frozenset({"model.read", "model.call"}))
    assert permissions_of(narrowed) == {P.MODEL_READ, P.MODEL_CALL}
    assert authorize(narrowed, P.MODEL_CALL, OWN_PRIVATE) is A
    assert authorize(narrowed, P.MODEL_REGISTER, OWN_PRIVATE) is D
    assert authorize(narrowed, P.MEMBERS_MANAGE, TenantScoped("acme")) is D
    widened = member("consumer", scopes=frozenset({"model.register", "model.call"}))
    assert permissions_of(widened) == {P.MODEL_CALL}
    assert authorize(member("owner", scopes=frozenset()), P.MODEL_READ, OWN_PRIVATE) is D


def test_own_keys_are_managed_with_keys_self() -> None:
    consumer = member("consumer")
    mine = TenantScoped("acme", principal_id="acme/consumer")
    theirs = TenantScoped("acme", principal_id="acme/publisher")
    assert authorize(consumer, P.KEYS_MANAGE, mine) is A
    assert authorize(consumer, P.KEYS_MANAGE, theirs) is D
    no_self = member("consumer", scopes=frozenset({"model.call"}))
    assert authorize(no_self, P.KEYS_MANAGE, mine) is D
    assert authorize(member("owner"), P.KEYS_MANAGE, theirs) is A


def test_a_principal_without_a_tenant_sees_no_tenant() -> None:
    stranger = Principal(id="nobody", roles=frozenset({"owner"}))
    assert authorize(stranger, P.TENANT_READ, TenantScoped("acme")) is H
    assert authorize(stranger, P.MODEL_READ, OWN_PRIVATE) is H
    assert authorize(stranger, P.MODEL_REGISTER, Namespace("acme")) is D


def test_unknown_roles_grant_nothing() -> None:
    assert permissions_of(Principal(id="x", roles=frozenset({"superuser"}), tenant="acme")) == set()


@pytest.mark.parametrize(
    ("to", "permission"),
    [
        ("approved", P.VERSION_APPROVE),
        ("rejected", P.VERSION_APPROVE),
        ("deployed", P.VERSION_DEPLOY),
        ("validated", P.MODEL_REGISTER),
        ("deprecated", P.MODEL_REGISTER),
        ("archived", P.MODEL_REGISTER),
    ],
)
def test_transition_permissions(to: str, permission: Permission) -> None:
    assert transition_permission(to) is permission


def test_delegable_scopes() -> None:
    owner = member("owner")
    assert delegable_scopes(owner, None) is None
    assert delegable_scopes(owner, ("model.call",)) == ("model.call",)
    scoped = member("owner", scopes=frozenset({"keys.self", "model.call"}))
    assert delegable_scopes(scoped, None) == ("keys.self", "model.call")
    assert delegable_scopes(scoped, ("model.call",)) == ("model.call",)
    with pytest.raises(ValueError, match=r"model\.register"):
        delegable_scopes(scoped, ("model.call", "model.register"))
    assert delegable_scopes(ADMIN, ("platform.manage",)) == ("platform.manage",)
    # An unscoped key holds what its roles allow, no more: an owner's has no
    # platform.manage to give, and an admin key scoped down has only its scopes.
    with pytest.raises(ValueError, match=r"platform\.manage"):
        delegable_scopes(owner, ("model.call", "platform.manage"))
    narrowed_admin = Principal(
        id="admin", roles=frozenset({"admin"}), scopes=frozenset({"audit.read"})
    )
    with pytest.raises(ValueError, match=r"keys\.manage"):
        delegable_scopes(narrowed_admin, ("keys.manage",))


def test_assignable_roles() -> None:
    assert "admin" in assignable_roles(ADMIN)
    assert assignable_roles(member("owner")) == TENANT_ROLES
    assert "admin" not in TENANT_ROLES


def test_separation_of_duties() -> None:
    approver = member("approver")
    assert separation_forbids(approver, "acme/approver", True)
    assert not separation_forbids(approver, "acme/approver", False)
    assert not separation_forbids(approver, "acme/publisher", True)
    # Owners hold version.override.
    assert not separation_forbids(member("owner"), "acme/owner", True)


def test_nobody_obtains_a_key_that_outranks_their_own_roles() -> None:
    owner = member("owner")
    assert may_issue_for(owner, ["consumer", "publisher"])
    assert may_issue_for(owner, ["owner"])
    assert not may_issue_for(owner, ["admin"])
    assert may_issue_for(ADMIN, ["admin"])
    assert not may_issue_for(member("publisher"), ["deployer"])
    # A narrow key of an owner still speaks for the owner's roles (its scopes bound the
    # new key separately, see delegable_scopes).
    assert may_issue_for(member("owner", scopes=frozenset({"keys.manage"})), ["consumer"])
