"""Who may call what: the rules of an inference call.

- A model: the policy decides from the model's visibility and the grants the caller's
  tenant holds (``AccessFacts``, cached); a caller that may not see it gets the very
  404 of a model that does not exist.
- A version of another tenant: callable only once approved (or deployed).
- An endpoint: only in its own tenant (404 for others).
- A version whose publisher mounted another tenant's files: only while the publisher
  may still read them.
"""

from __future__ import annotations

from modelport.errors import Forbidden
from modelport.inference.access_facts import AccessFacts
from modelport.inference.targets import Target
from modelport.registry.errors import model_not_found
from modelport.serving.endpoints.errors import endpoint_not_found
from modelport.serving.endpoints.types import Endpoint
from modelport.tenancy.enforce import enforce
from modelport.tenancy.policy import ModelResource, Permission, TenantScoped, permissions_of
from modelport.tenancy.types import Principal

SERVABLE_ACROSS_TENANTS = ("approved", "deployed")
"""States a version must be in before other tenants may call it."""


async def require_model(
    facts: AccessFacts, principal: Principal, owner: str, name: str, permission: Permission
) -> None:
    """Raise unless ``principal`` may do ``permission`` on ``owner/name``. No query for the
    admin or for a caller in the model's own namespace (its roles decide; a missing
    model is the caller's own 404 later), and across tenants only when a fact is not
    cached."""
    if Permission.PLATFORM_MANAGE in permissions_of(principal):
        return
    hidden = lambda: model_not_found(owner, name)  # noqa: E731
    if principal.tenant == owner:
        enforce(principal, permission, ModelResource(owner, "private"), hidden=hidden)
        return
    visibility = await facts.visibility(owner, name)
    shared = False
    if visibility != "public" and principal.tenant is not None and not principal.is_admin:
        shared = (await facts.grants(principal.tenant)).covers(owner, name)
    enforce(principal, permission, ModelResource(owner, visibility, shared), hidden=hidden)


def require_callable_state(principal: Principal, owner: str, target: Target) -> None:
    """Other tenants may call a version only once it is approved (or deployed)."""
    if principal.is_admin or principal.tenant == owner:
        return
    state = target.state
    if state.value not in SERVABLE_ACROSS_TENANTS:
        raise Forbidden(
            f"{target.key.ref} is {state.value}; other tenants may call it once approved",
            code="version_not_approved",
            state=state.value,
        )


async def require_files_usable(facts: AccessFacts, target: Target) -> None:
    """A version whose publisher mounted files (listed blobs it does not hold, lent by a
    version it could read when it published) runs only while its publisher may still
    read one lender of each: a withdrawn grant ends it (403 ``version_files_withdrawn``).
    Callers skip it for a version whose publisher holds its files (``borrowed`` empty)."""
    owner = target.model.split("/", 1)[0]
    grants = await facts.grants(owner)
    for lenders in target.borrowed:
        if not any(v == "public" or o == owner or grants.covers(o, n) for o, n, v in lenders):
            raise Forbidden(
                f"{target.key.ref} lists files its publisher may no longer read (the "
                "grant it had on their model was withdrawn)",
                code="version_files_withdrawn",
            )


def require_endpoint(principal: Principal, endpoint: Endpoint, permission: Permission) -> None:
    """404 for a caller outside the endpoint's tenant, 403 for one without ``permission``."""
    enforce(
        principal,
        permission,
        TenantScoped(endpoint.tenant),
        hidden=lambda: endpoint_not_found(endpoint.name),
    )
