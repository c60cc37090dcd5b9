"""The one access rule over plain facts: who sees and may act on a model, which facts a
decision reads, which versions other tenants may call, and mounted files."""

from __future__ import annotations

import pytest

from modelport.tenancy.access import (
    SERVABLE_ACROSS_TENANTS,
    RefusalKind,
    callable_refusal,
    decide_model,
    files_refusal,
    needs_grants,
    needs_model_facts,
    tenant_sees,
)
from modelport.tenancy.admin import ADMIN
from modelport.tenancy.policy import Decision, Permission
from modelport.tenancy.types import GrantSet, Principal

P = Permission
A, D, H = Decision.ALLOW, Decision.DENY, Decision.HIDE
NONE = GrantSet()
WHOLE_NAMESPACE = GrantSet(namespaces=frozenset({"acme"}))
THIS_MODEL = GrantSet(models=frozenset({("acme", "m")}))
ANOTHER_MODEL = GrantSet(models=frozenset({("acme", "other")}))


def member(role: str, tenant: str = "acme", scopes: frozenset[str] | None = None) -> Principal:
    return Principal(id=f"{tenant}/{role}", roles=frozenset({role}), tenant=tenant, scopes=scopes)


OWNER = member("owner")
OTHER = member("consumer", tenant="globex")
OPS_ONLY = Principal(id="admin", roles=frozenset({"admin"}), scopes=frozenset({"platform.manage"}))


@pytest.mark.parametrize(
    ("principal", "permission", "visibility", "grants", "want"),
    [
        # The owning tenant: its roles decide, whatever the visibility.
        (OWNER, P.MODEL_REGISTER, "private", None, A),
        (member("consumer"), P.MODEL_CALL, "private", None, A),
        (member("consumer"), P.MODEL_REGISTER, "private", None, D),
        (member("billing"), P.MODEL_CALL, "private", None, D),
        (member("approver"), P.VERSION_APPROVE, "public", None, A),
        # Another tenant: a private model is hidden unless a grant covers it.
        (OTHER, P.MODEL_CALL, "private", None, H),
        (OTHER, P.MODEL_CALL, "private", NONE, H),
        (OTHER, P.MODEL_CALL, "private", ANOTHER_MODEL, H),
        (OTHER, P.MODEL_CALL, "private", THIS_MODEL, A),
        (OTHER, P.MODEL_CALL, "private", WHOLE_NAMESPACE, A),
        (OTHER, P.MODEL_CALL, "public", None, A),
        (OTHER, P.MODEL_READ, "public", None, A),
        # ... and sees it to read and call at most, as its own roles allow.
        (OTHER, P.VERSION_DEPLOY, "public", None, D),
        (OTHER, P.MODEL_REGISTER, "private", WHOLE_NAMESPACE, D),
        (member("publisher", tenant="globex"), P.MODEL_CALL, "public", None, D),
        # The platform operator: everything its credential's scopes allow.
        (ADMIN, P.VERSION_DEPLOY, "private", None, A),
        (OPS_ONLY, P.MODEL_CALL, "private", None, D),
        # A credential scoped away from platform.manage is a member of its tenant.
        (
            member("admin", tenant="ops", scopes=frozenset({"model.call"})),
            P.MODEL_CALL,
            "private",
            None,
            H,
        ),
    ],
)
def test_decide_model(
    principal: Principal,
    permission: Permission,
    visibility: str,
    grants: GrantSet | None,
    want: Decision,
) -> None:
    assert decide_model(principal, permission, "acme", "m", visibility, grants) is want


@pytest.mark.parametrize(
    ("principal", "facts", "grants_for_private"),
    [(ADMIN, False, False), (OWNER, False, False), (OTHER, True, True)],
)
def test_only_the_facts_that_can_change_the_answer_are_read(
    principal: Principal, facts: bool, grants_for_private: bool
) -> None:
    assert needs_model_facts(principal, "acme") is facts
    assert needs_grants(principal, "acme", "private") is grants_for_private
    assert needs_grants(principal, "acme", "public") is False


@pytest.mark.parametrize(
    ("tenant", "visibility", "grants", "sees"),
    [
        ("acme", "private", None, True),
        ("globex", "public", None, True),
        ("globex", "private", None, False),
        ("globex", "private", THIS_MODEL, True),
        ("globex", "private", ANOTHER_MODEL, False),
        (None, "private", None, False),
    ],
)
def test_tenant_sees(
    tenant: str | None, visibility: str, grants: GrantSet | None, sees: bool
) -> None:
    assert tenant_sees(tenant, "acme", "m", visibility, grants) is sees


@pytest.mark.parametrize(
    "state",
    ["candidate", "validated", "approved", "deployed", "deprecated", "archived", "rejected"],
)
@pytest.mark.parametrize("principal", [OWNER, OTHER, ADMIN], ids=["owner", "other", "admin"])
def test_other_tenants_call_only_approved_or_deployed_versions(
    principal: Principal, state: str
) -> None:
    refusal = callable_refusal(principal, "acme", "acme/m:1", state)
    if principal is OTHER and state not in SERVABLE_ACROSS_TENANTS:
        assert refusal is not None
        assert (refusal.kind, refusal.code) == (RefusalKind.FORBIDDEN, "version_not_approved")
        assert refusal.details == {"state": state}
    else:
        assert refusal is None


@pytest.mark.parametrize(
    ("lenders", "grants", "usable"),
    [
        ([[("globex", "g", "public")]], None, True),
        ([[("acme", "mine", "private")]], None, True),
        ([[("globex", "g", "private")]], None, False),
        ([[("globex", "g", "private")]], GrantSet(models=frozenset({("globex", "g")})), True),
        # One readable lender per file is enough; every file needs one.
        ([[("globex", "g", "private"), ("initech", "i", "public")]], None, True),
        ([[("initech", "i", "public")], [("globex", "g", "private")]], None, False),
    ],
)
def test_mounted_files_need_a_lender_the_publisher_still_reads(
    lenders: list[list[tuple[str, str, str]]], grants: GrantSet | None, usable: bool
) -> None:
    refusal = files_refusal("acme", "acme/m:1", lenders, grants)
    assert (refusal is None) is usable
    if refusal is not None:
        assert refusal.code == "version_files_withdrawn"
