"""What the client raises: the server's problems as ``ApiError`` subclasses (by status, with
the platform's stable ``code``), and ``ConnectionFailed`` / ``ConfigurationError`` when no
answer came at all. Every message is one line that says what to check::

    ClientError
    ├── ApiError              status, code, detail, body
    │   ├── InvalidRequest    400, 422
    │   ├── Unauthorized      401
    │   ├── PaymentRequired   402
    │   ├── Forbidden         403
    │   ├── NotFound          404
    │   ├── Conflict          409
    │   ├── RateLimited       429 (retry_after, seconds)
    │   └── ServerError       5xx
    ├── ConnectionFailed      the server did not answer
    ├── ConfigurationError    the URL (or another setting) cannot work
    ├── InvalidReference      a model, version or endpoint reference is malformed
    └── TransferError         an upload or download failed (``modelport.client.transfer``)
"""

from __future__ import annotations

from typing import Any

import httpx


class ClientError(Exception):
    """Base of everything the client raises on purpose; ``str()`` is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ApiError(ClientError):
    """The server answered with an error: its HTTP ``status``, stable ``code`` (such as
    ``model_not_found``) and human ``detail``; ``body`` is the whole problem document."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any]) -> None:
        super().__init__(f"{detail} ({code})")
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r})"


class InvalidRequest(ApiError):
    """400: the request was refused as it stands (see ``code`` and ``body``)."""


class Unauthorized(ApiError):
    """401: no API key, or one the server does not accept."""


class PaymentRequired(ApiError):
    """402: the tenant's budget or balance does not allow the call."""


class Forbidden(ApiError):
    """403: the key is known but may not do this."""


class NotFound(ApiError):
    """404: no such thing, or one the caller may not see."""


class Conflict(ApiError):
    """409: the request clashes with the current state (exists already, wrong state)."""


class RateLimited(ApiError):
    """429: too many requests or too many at once; ``retry_after`` seconds, when told."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        body: dict[str, Any],
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, code, detail, body)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server failed or is unavailable."""


class ConnectionFailed(ClientError):
    """No answer: nothing listens at the URL, the name does not resolve, or it timed out."""


class ConfigurationError(ClientError):
    """A setting cannot work (typically the server URL)."""


class InvalidReference(ClientError, ValueError):
    """A reference the client cannot use (``owner/name``, ``owner/name:V`` expected)."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    402: PaymentRequired,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: InvalidRequest,
    429: RateLimited,
}


def error_from_response(response: httpx.Response) -> ApiError:
    """The exception for an error answer: ``/api``'s problem+json (``detail``, ``code``) or
    ``/v2``'s ``{"error", "code"}``; anything else (a proxy's HTML page) by its status."""
    status = response.status_code
    try:
        parsed = response.json()
    except ValueError:
        parsed = None
    body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    code = str(body.get("code") or f"http_{status}")
    detail = body.get("detail") or body.get("error")
    if not isinstance(detail, str) or not detail:
        text = " ".join(response.text.split())[:200]
        detail = f"HTTP {status} {response.reason_phrase}" + (f": {text}" if text else "")
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    if cls is RateLimited:
        return RateLimited(status, code, detail, body, _retry_after(response))
    return cls(status, code, detail, body)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
