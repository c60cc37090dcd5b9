"""The gRPC surface's one mapper of refusals: a ``ModelportError``'s transport-neutral
``kind`` to a gRPC status code, its stable ``code`` carried twice, in the status message
(``"<code>: <message>"``, which every client shows, and what a stream's in-band
``error_message`` carries) and in the trailing metadata (``modelport-error-code``), with
``retry-after`` (seconds, as HTTP's header) where the refusal says when to come back."""

from __future__ import annotations

import grpc

from modelport.errors import ModelportError

ERROR_CODE_KEY = "modelport-error-code"
"""Trailing metadata: the platform's stable error code (``rate_limited``...)."""
RETRY_AFTER_KEY = "retry-after"
"""Trailing metadata: whole seconds to wait before trying again."""

STATUS_OF_KIND: dict[str, grpc.StatusCode] = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    # A budget or balance: the call cannot succeed until someone pays, not a retry.
    "payment_required": grpc.StatusCode.FAILED_PRECONDITION,
    "forbidden": grpc.StatusCode.PERMISSION_DENIED,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "request_timeout": grpc.StatusCode.DEADLINE_EXCEEDED,
    "conflict": grpc.StatusCode.ABORTED,
    "too_large": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "range": grpc.StatusCode.OUT_OF_RANGE,
    "gone": grpc.StatusCode.NOT_FOUND,
    "unprocessable": grpc.StatusCode.FAILED_PRECONDITION,
    "overloaded": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "deadline": grpc.StatusCode.DEADLINE_EXCEEDED,
    "internal": grpc.StatusCode.INTERNAL,
}


def status_of(exc: ModelportError) -> grpc.StatusCode:
    return STATUS_OF_KIND.get(exc.kind, grpc.StatusCode.INTERNAL)


def message_of(exc: ModelportError) -> str:
    """``"<code>: <message>"``."""
    return f"{exc.code}: {exc.message}"


def trailers_of(exc: ModelportError) -> tuple[tuple[str, str], ...]:
    trailers = [(ERROR_CODE_KEY, exc.code)]
    retry_after = exc.extra.get("retry_after")
    if retry_after is not None:
        trailers.append((RETRY_AFTER_KEY, str(max(1, round(float(retry_after))))))
    return tuple(trailers)
