"""Turn a policy decision into the error the caller may see, for every service.

HIDE becomes the very 404 an absent resource gives (``hidden()``), so a caller cannot
tell a resource it may not see from one that does not exist; DENY becomes 403. A
``Refusal`` of ``tenancy.access`` becomes its own code (``refuse``).
"""

from __future__ import annotations

from collections.abc import Callable

from modelport.errors import Forbidden, NotFound
from modelport.tenancy.access import Refusal, RefusalKind
from modelport.tenancy.policy import Decision, Permission, Resource, authorize, separation_forbids
from modelport.tenancy.types import Principal


def forbidden(permission: Permission) -> Forbidden:
    return Forbidden(
        f"this API key does not allow {permission.value}",
        code="forbidden",
        permission=permission.value,
    )


def enforce(
    principal: Principal,
    permission: Permission,
    resource: Resource,
    *,
    hidden: Callable[[], NotFound],
) -> None:
    """Return if allowed; raise 403, or ``hidden()`` where the caller may not see it."""
    decided(authorize(principal, permission, resource), permission, hidden=hidden)


def decided(decision: Decision, permission: Permission, *, hidden: Callable[[], NotFound]) -> None:
    """Return if ``decision`` (on ``permission``) allows; raise 403, or ``hidden()``."""
    if decision is Decision.ALLOW:
        return
    if decision is Decision.HIDE:
        raise hidden()
    raise forbidden(permission)


def refuse(refusal: Refusal | None, *, hidden: Callable[[], NotFound] | None = None) -> None:
    """Return if there is no refusal; raise its 403, or ``hidden()`` for a NOT_FOUND."""
    if refusal is None:
        return
    if refusal.kind is RefusalKind.NOT_FOUND:
        raise hidden() if hidden is not None else NotFound(refusal.message, code=refusal.code)
    raise Forbidden(refusal.message, code=refusal.code, **refusal.details)


def check_separation_of_duties(
    principal: Principal, ref: str, published_by: str, require_separation: bool, to: str
) -> None:
    """Where the tenant requires it, nobody approves or rejects (``to``) a version
    (``ref``) they published themselves, unless they hold ``version.override``."""
    if separation_forbids(principal, published_by, require_separation):
        owner = ref.partition("/")[0]
        raise Forbidden(
            f"{owner} requires separation of duties: {principal.id} published "
            f"{ref} and may not also {to.removesuffix('d')} it",
            code="separation_of_duties",
        )
