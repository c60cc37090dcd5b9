"""Who is calling and what they may do: tenants, members and service accounts, API keys,
roles and grants, the audit log (and, in ``limits``, rate and concurrency limits)."""

from modelport.tenancy.admin import AdminKeyAuthenticator
from modelport.tenancy.authn import Authenticator
from modelport.tenancy.policy import Decision, Permission, authorize
from modelport.tenancy.service import TenancyService
from modelport.tenancy.types import Principal

__all__ = [
    "AdminKeyAuthenticator",
    "Authenticator",
    "Decision",
    "Permission",
    "Principal",
    "TenancyService",
    "authorize",
]
