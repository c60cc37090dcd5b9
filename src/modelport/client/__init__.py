"""A Python client of the platform: ``Client`` (sync) and ``AsyncClient``, on httpx.

See docs/client.md. Errors are in ``modelport.client.errors``; results in
``modelport.client.types``.
"""

from modelport.client.client import AsyncClient, Client
from modelport.client.endpoints import Canary
from modelport.client.errors import (
    ApiError,
    ClientError,
    ConfigurationError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    InvalidReference,
    InvalidRequest,
    NotFound,
    PaymentRequired,
    RateLimited,
    ServerError,
    Unauthorized,
)

__all__ = [
    "ApiError",
    "AsyncClient",
    "Canary",
    "Client",
    "ClientError",
    "ConfigurationError",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "InvalidReference",
    "InvalidRequest",
    "NotFound",
    "PaymentRequired",
    "RateLimited",
    "ServerError",
    "Unauthorized",
]
