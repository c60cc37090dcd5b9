"""The one access rule: may this principal do this to this model, version or endpoint.

Every question is a pure function of plain facts (a model's owner and visibility, the
grants the caller's tenant holds, a version's state), so the rule is written once and
each caller reads the facts its own way: the inference service from its cached
``AccessFacts``, the HTTP routes and the services from plain reads. What the roles
allow on each kind of resource is ``policy.authorize``; this module adds what depends
on the resource's facts:

- a model is seen by its own tenant, by everyone when public, and by a tenant another
  shared it with (``tenant_sees``); a principal then needs the permission by its roles
  and scopes, and across tenants only ``model.read`` and ``model.call`` are ever given
  (``decide_model``);
- the platform operator and a model's own tenant are decided by roles alone, with no
  fact about the model (``needs_model_facts``), and grants matter only for another
  tenant's private model (``needs_grants``): callers skip those reads otherwise;
- another tenant's version is callable only once approved or deployed
  (``callable_refusal``);
- a version whose publisher mounted another tenant's files runs only while the
  publisher may still read one lender of each (``files_refusal``).

Refusals that a role cannot explain carry their own stable code (``Refusal``); turning
one into an error is ``enforce.refuse``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from modelport.tenancy.policy import Decision, ModelResource, Permission, authorize, permissions_of
from modelport.tenancy.types import GrantSet, Principal

SERVABLE_ACROSS_TENANTS = ("approved", "deployed")
"""States a version must be in before other tenants may call it."""

Lender = tuple[str, str, str]
"""A model that lends a file: (owner, name, visibility)."""


class RefusalKind(StrEnum):
    NOT_FOUND = "not_found"
    """The caller may not learn that the resource exists: the resource's own 404."""
    FORBIDDEN = "forbidden"
    """The caller may know the resource, but not do this: 403."""


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused, with the stable machine code the caller sees."""

    kind: RefusalKind
    code: str
    message: str
    details: dict[str, str] = field(default_factory=dict)


def is_operator(principal: Principal) -> bool:
    """The platform operator on a credential that keeps ``platform.manage``."""
    return Permission.PLATFORM_MANAGE in permissions_of(principal)


def needs_model_facts(principal: Principal, owner: str) -> bool:
    """Whether deciding on a model of ``owner`` needs its visibility: not for the
    operator (its scopes decide) nor for the model's own tenant (its roles decide)."""
    return not is_operator(principal) and principal.tenant != owner


def needs_grants(principal: Principal, owner: str, visibility: str) -> bool:
    """Whether the caller's tenant's grants can change the decision: only for another
    tenant's model that is not public."""
    return (
        visibility != "public"
        and principal.tenant is not None
        and principal.tenant != owner
        and not is_operator(principal)
    )


def tenant_sees(
    tenant: str | None, owner: str, name: str, visibility: str, grants: GrantSet | None
) -> bool:
    """Whether ``tenant`` may see the model ``owner/name``: its own, a public one, or
    one a grant it holds covers (``grants`` None: it holds none)."""
    return (
        visibility == "public"
        or (tenant is not None and tenant == owner)
        or (grants is not None and grants.covers(owner, name))
    )


def model_resource(
    principal: Principal, owner: str, name: str, visibility: str, grants: GrantSet | None
) -> ModelResource:
    """The model as ``authorize`` sees it from ``principal``'s side."""
    shared = needs_grants(principal, owner, visibility) and tenant_sees(
        principal.tenant, owner, name, visibility, grants
    )
    return ModelResource(owner, visibility, shared)


def decide_model(
    principal: Principal,
    permission: Permission,
    owner: str,
    name: str,
    visibility: str,
    grants: GrantSet | None = None,
) -> Decision:
    """May ``principal`` do ``permission`` on ``owner/name``? HIDE: it may not even see
    it. Where ``needs_model_facts`` is false, ``visibility`` and ``grants`` are unused."""
    return authorize(
        principal, permission, model_resource(principal, owner, name, visibility, grants)
    )


def may_call_state(principal: Principal, owner: str, state: str) -> bool:
    """Whether ``principal`` may call a version of ``owner`` in ``state``: its own
    tenant and the operator always, other tenants once it is approved or deployed."""
    return principal.is_admin or principal.tenant == owner or state in SERVABLE_ACROSS_TENANTS


def callable_refusal(principal: Principal, owner: str, ref: str, state: str) -> Refusal | None:
    """None if ``principal`` may call the version ``ref`` of ``owner`` in ``state``."""
    if may_call_state(principal, owner, state):
        return None
    return Refusal(
        RefusalKind.FORBIDDEN,
        "version_not_approved",
        f"{ref} is {state}; other tenants may call it once approved",
        {"state": state},
    )


def files_refusal(
    owner: str, ref: str, borrowed: Iterable[Iterable[Lender]], grants: GrantSet | None
) -> Refusal | None:
    """None if the publisher ``owner`` of version ``ref`` may still read one lender of
    each file it mounted (``borrowed``: the lenders of each such file)."""
    for lenders in borrowed:
        if not any(tenant_sees(owner, o, n, v, grants) for o, n, v in lenders):
            return Refusal(
                RefusalKind.FORBIDDEN,
                "version_files_withdrawn",
                f"{ref} lists files its publisher may no longer read (the grant it had "
                "on their model was withdrawn)",
            )
    return None
