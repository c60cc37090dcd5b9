"""Who is calling: principals and credentials (today the operator's admin key)."""

from modelport.tenancy.admin import AdminKeyAuthenticator
from modelport.tenancy.types import Principal

__all__ = ["AdminKeyAuthenticator", "Principal"]
