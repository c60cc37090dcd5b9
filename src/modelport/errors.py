"""The one exception tree of modelport.

Every error a user can cause or see is a ``ModelportError`` with a stable
machine ``code`` and a transport-neutral ``kind``. Each HTTP surface maps
``kind`` to a status once (see ``modelport.api.problems``)::

    ModelportError
    ├── InvalidInput        kind=invalid          (400)
    ├── Unauthenticated     kind=unauthenticated  (401)
    ├── PaymentRequired     kind=payment_required (402)
    ├── Forbidden           kind=forbidden        (403)
    ├── NotFound            kind=not_found        (404)
    ├── RequestTimeout      kind=request_timeout  (408)
    ├── Conflict            kind=conflict         (409)
    ├── Gone                kind=gone             (410)
    ├── PayloadTooLarge     kind=too_large        (413)
    ├── RangeNotSatisfiable kind=range            (416)
    ├── Unprocessable       kind=unprocessable    (422)
    ├── Overloaded          kind=overloaded       (429)
    ├── Unavailable         kind=unavailable      (503)
    ├── DeadlineExceeded    kind=deadline         (504)
    └── Internal            kind=internal         (500)
"""

from __future__ import annotations

from typing import Any, ClassVar


class ModelportError(Exception):
    """Base of every error modelport raises on purpose."""

    kind: ClassVar[str] = "internal"
    default_code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.extra = extra

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidInput(ModelportError):
    kind = "invalid"
    default_code = "invalid_request"


class Unauthenticated(ModelportError):
    kind = "unauthenticated"
    default_code = "unauthenticated"


class PaymentRequired(ModelportError):
    """The caller's budget does not allow this call (refused before any work)."""

    kind = "payment_required"
    default_code = "payment_required"


class Forbidden(ModelportError):
    kind = "forbidden"
    default_code = "forbidden"


class NotFound(ModelportError):
    kind = "not_found"
    default_code = "not_found"


class Conflict(ModelportError):
    kind = "conflict"
    default_code = "conflict"


class Gone(ModelportError):
    """What was asked for existed and was erased (retention, the right to deletion)."""

    kind = "gone"
    default_code = "erased"


class RequestTimeout(ModelportError):
    """The client stopped sending its request body (``body_timeout``)."""

    kind = "request_timeout"
    default_code = "body_timeout"


class PayloadTooLarge(ModelportError):
    """A request body (or one chunk of it) is over a configured limit."""

    kind = "too_large"
    default_code = "payload_too_large"


class RangeNotSatisfiable(ModelportError):
    kind = "range"
    default_code = "range_not_satisfiable"


class Unprocessable(ModelportError):
    kind = "unprocessable"
    default_code = "unprocessable"


class Overloaded(ModelportError):
    kind = "overloaded"
    default_code = "overloaded"


class Unavailable(ModelportError):
    kind = "unavailable"
    default_code = "unavailable"


class DeadlineExceeded(ModelportError):
    """The request's deadline passed before it could be answered."""

    kind = "deadline"
    default_code = "deadline_exceeded"


class Internal(ModelportError):
    kind = "internal"
    default_code = "internal_error"
