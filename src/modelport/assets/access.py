"""The models' access rule (``tenancy.access``) on an asset's own facts.

The asset's tenant and the operator decide by roles; another tenant sees a public asset,
or a private one a grant covers (a grant names a model or an asset by its name in the
namespace; a namespace grant covers all), and may only read it. An asset the caller may
not see is the 404 of a missing one (``hidden``).
"""

from __future__ import annotations

from collections.abc import Callable

from modelport.errors import ModelportError, NotFound
from modelport.tenancy.access import decide_model, needs_grants
from modelport.tenancy.enforce import decided
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import GrantSet, Principal


class AssetAccess:
    """Decides one principal's permission on one asset."""

    def __init__(self, grants: Callable[[str], GrantSet]) -> None:
        self.grants = grants
        """What other tenants shared with a tenant (``TenancyService.grants_to``)."""

    def decide(
        self,
        principal: Principal,
        permission: Permission,
        *,
        owner: str,
        name: str,
        visibility: str,
        hidden: Callable[[], NotFound],
    ) -> None:
        """Return when allowed; raise ``hidden()`` where the caller may not see the asset,
        403 where it may see but not do this."""
        grants = (
            self.grants(principal.tenant)
            if principal.tenant is not None and needs_grants(principal, owner, visibility)
            else None
        )
        decision = decide_model(principal, permission, owner, name, visibility, grants)
        decided(decision, permission, hidden=hidden)

    def sees(self, principal: Principal, *, owner: str, name: str, visibility: str) -> bool:
        """Whether the caller may read the asset."""
        try:
            self.decide(
                principal,
                Permission.MODEL_READ,
                owner=owner,
                name=name,
                visibility=visibility,
                hidden=lambda: NotFound("not found"),
            )
        except ModelportError:  # hidden, or a key scoped away from reading
            return False
        return True
