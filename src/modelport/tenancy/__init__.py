"""Who is calling and what they may do: tenants, members and service accounts, API keys,
roles and grants, the audit log (and, in ``limits``, rate and concurrency limits).

Only the plain types and the pure policy are exported here, so that importing them
(as the CLI does) does not load the database stack; services live in their modules
(``tenancy.service``, ``tenancy.authn``, ``tenancy.admin``).
"""

from modelport.tenancy.policy import Decision, Permission, authorize
from modelport.tenancy.types import Principal

__all__ = ["Decision", "Permission", "Principal", "authorize"]
