"""Who may call what, on the hot path: the facts of an inference call, read from the
cached ``AccessFacts``, handed to the one access rule (``tenancy.access``).

- A model: ``decide_model`` from the model's visibility and the grants the caller's
  tenant holds, read only where they can change the answer; a caller that may not
  see it gets the very 404 of a model that does not exist.
- A version of another tenant: callable only once approved (or deployed).
- An endpoint: only in its own tenant (404 for others).
- A version whose publisher mounted another tenant's files: only while the publisher
  may still read them.
"""

from __future__ import annotations

from modelport.inference.access_facts import AccessFacts
from modelport.inference.targets import Target
from modelport.registry.errors import model_not_found
from modelport.serving.endpoints.errors import endpoint_not_found
from modelport.serving.endpoints.types import Endpoint
from modelport.tenancy.access import (
    SERVABLE_ACROSS_TENANTS as SERVABLE_ACROSS_TENANTS,  # re-exported: named here before
)
from modelport.tenancy.access import (
    callable_refusal,
    decide_model,
    files_refusal,
    needs_grants,
    needs_model_facts,
)
from modelport.tenancy.enforce import decided, enforce, refuse
from modelport.tenancy.policy import Permission, TenantScoped
from modelport.tenancy.types import GrantSet, Principal


async def require_model(
    facts: AccessFacts, principal: Principal, owner: str, name: str, permission: Permission
) -> None:
    """Raise unless ``principal`` may do ``permission`` on ``owner/name``. No query for the
    operator or for a caller in the model's own namespace (its roles decide; a missing
    model is the caller's own 404 later), and across tenants only when a fact is not
    cached."""
    visibility = "private"  # unread where it cannot change the answer
    grants: GrantSet | None = None
    if needs_model_facts(principal, owner):
        visibility = await facts.visibility(owner, name)
        if needs_grants(principal, owner, visibility) and principal.tenant is not None:
            grants = await facts.grants(principal.tenant)
    decided(
        decide_model(principal, permission, owner, name, visibility, grants),
        permission,
        hidden=lambda: model_not_found(owner, name),
    )


def require_callable_state(principal: Principal, owner: str, target: Target) -> None:
    """Other tenants may call a version only once it is approved (or deployed)."""
    refuse(callable_refusal(principal, owner, target.key.ref, target.state.value))


async def require_files_usable(facts: AccessFacts, target: Target) -> None:
    """A version whose publisher mounted files (listed blobs it does not hold, lent by a
    version it could read when it published) runs only while its publisher may still
    read one lender of each: a withdrawn grant ends it (403 ``version_files_withdrawn``).
    Callers skip it for a version whose publisher holds its files (``borrowed`` empty)."""
    owner = target.model.split("/", 1)[0]
    grants = await facts.grants(owner)
    refuse(files_refusal(owner, target.key.ref, target.borrowed, grants))


def require_endpoint(principal: Principal, endpoint: Endpoint, permission: Permission) -> None:
    """404 for a caller outside the endpoint's tenant, 403 for one without ``permission``."""
    enforce(
        principal,
        permission,
        TenantScoped(endpoint.tenant),
        hidden=lambda: endpoint_not_found(endpoint.name),
    )
