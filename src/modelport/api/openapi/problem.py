"""The RFC 9457 problem document every ``/api`` error answers, as an OpenAPI schema, and
``problems()``: the error responses a route declares beside the ones every route has
(``document.COMMON``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_REF = "#/components/schemas/Problem"

DESCRIPTIONS = {
    400: "The request is malformed or a value is invalid (`invalid_request` and kin).",
    401: "No API key, or one that is unknown, revoked or expired.",
    402: "The caller's budget or balance does not cover the call.",
    403: "The key's roles or scopes do not allow this.",
    404: "What the path names does not exist, or the caller may not see it.",
    408: "The client stopped sending its request body (`body_timeout`).",
    409: "The request conflicts with the current state (a name taken, an immutable "
    "version, a transition not allowed from the current state).",
    413: "The request body (or one chunk) is over a configured limit.",
    410: "It existed and was erased (its tenant's retention, or the right to deletion).",
    416: "The range or upload offset does not match what is stored.",
    429: "A rate, concurrency or queue limit was reached; see `Retry-After`.",
    500: "A bug: the detail carries the request id to quote.",
    503: "A dependency (model, backend, database) cannot answer now; see `Retry-After`.",
    504: "The request's deadline passed before it could be answered.",
}


class FieldError(BaseModel):
    """One invalid field of a request that failed validation."""

    field: str = Field(description="Dotted path of the field (`query.limit`, `name`)")
    error: str = Field(description="What is wrong with it")


class Problem(BaseModel):
    """An error, as RFC 9457 problem details with the platform's stable machine `code`.

    Members beyond these may be present, depending on the code: the offending `field`,
    `retry_after` (seconds), `offset` (an upload's), `scope`, `problems`, ...
    """

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "example": {
                "type": "https://modelport.dev/problems/model_not_found",
                "title": "model not found",
                "status": 404,
                "detail": "model acme/iris not found",
                "code": "model_not_found",
                "instance": "/api/models/acme/iris",
            }
        },
    )

    type: str = Field(description="A URI naming the problem type (ends with the `code`)")
    title: str = Field(description="A short human summary of the problem type")
    status: int = Field(description="The HTTP status code", ge=100, le=599)
    detail: str = Field(description="What went wrong for this request, for a human")
    code: str = Field(description="The stable machine code (snake_case): branch on this")
    instance: str = Field(description="The request path")
    errors: list[FieldError] | None = Field(
        default=None,
        description="Every invalid field (codes `invalid_request`, `invalid_manifest`)",
    )
    retry_after: float | None = Field(
        default=None, description="Seconds to wait before trying again (429, 503)"
    )


def problem_response(status: int, description: str | None = None) -> dict[str, Any]:
    """The OpenAPI response object of an error answered with ``status``."""
    return {
        "description": description or DESCRIPTIONS[status],
        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": PROBLEM_REF}}},
    }


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's own error responses, for its decorator's ``responses=`` (the ones every
    ``/api`` route can answer are added to the document for all of them)."""
    return {status: problem_response(status) for status in statuses}
