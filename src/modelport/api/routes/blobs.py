"""/api/blobs/{digest}: stream a committed blob (with ``Range``), or ``HEAD`` its size,
to callers whose tenant holds it or who see a version of a tenant that does."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from modelport.api import deps
from modelport.api.access import require_blob
from modelport.api.auth import CurrentPrincipal
from modelport.api.openapi import problems
from modelport.api.problems import problem_response
from modelport.blobs.types import Blob

router = APIRouter(tags=["blobs"])

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class Unsatisfiable(Exception):
    """The requested range lies wholly past the end of the blob."""


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``[start, end)`` for a single ``bytes=`` range, None to send the whole blob.

    Syntactically invalid or multi-part ranges are ignored, as RFC 9110 allows.
    """
    match = _RANGE.match(header.strip()) if header else None
    if match is None or match[1] == match[2] == "":
        return None
    if match[1] == "":  # suffix: the last N bytes
        suffix = int(match[2])
        if suffix == 0 or size == 0:
            raise Unsatisfiable
        return max(0, size - suffix), size
    start = int(match[1])
    end = size if match[2] == "" else int(match[2]) + 1
    if match[2] and end <= start:
        return None
    if start >= size:
        raise Unsatisfiable
    return start, min(end, size)


def blob_headers(blob: Blob) -> dict[str, str]:
    return {
        "Blob-Digest": blob.digest,
        "ETag": f'"{blob.digest}"',
        "Accept-Ranges": "bytes",
        "Cache-Control": "private, max-age=31536000, immutable",
    }


@router.head(
    "/blobs/{digest}",
    response_class=Response,
    responses={
        200: {
            "description": "The blob is stored and readable",
            "headers": {
                "Content-Length": {"schema": {"type": "integer"}, "description": "Its size"},
                "Blob-Digest": {"schema": {"type": "string"}, "description": "Its digest"},
            },
        }
    },
)
def head_blob(
    blobs: deps.Blobs, digest: str, request: Request, principal: CurrentPrincipal
) -> Response:
    """A blob's size (``Content-Length``) and digest; 404 if it is not stored or the
    caller may not read it (``require_blob``): ``modelport push`` then uploads it."""
    require_blob(request, principal, digest)
    blob = blobs.stat(digest)
    headers = blob_headers(blob) | {"Content-Length": str(blob.size)}
    return Response(status_code=200, headers=headers, media_type="application/octet-stream")


_BYTES = {"schema": {"type": "string", "format": "binary"}}


@router.get(
    "/blobs/{digest}",
    response_class=StreamingResponse,
    responses={
        200: {"description": "The blob", "content": {"application/octet-stream": _BYTES}},
        206: {
            "description": "The range asked for",
            "content": {"application/octet-stream": _BYTES},
        },
        **problems(416),
    },
)
def get_blob(
    blobs: deps.Blobs, digest: str, request: Request, principal: CurrentPrincipal
) -> Response:
    """Stream a blob, or one ``Range: bytes=a-b`` of it (206)."""
    require_blob(request, principal, digest)
    blob = blobs.stat(digest)
    headers = blob_headers(blob)
    try:
        wanted = parse_range(request.headers.get("range"), blob.size)
    except Unsatisfiable:
        return problem_response(
            request,
            416,
            "range_not_satisfiable",
            f"{request.headers.get('range')} is past the end of the blob ({blob.size} bytes)",
            {"size": blob.size},
            {"Content-Range": f"bytes */{blob.size}"},
        )
    if wanted is None:
        body = blobs.read(blob)
        headers["Content-Length"] = str(blob.size)
        return StreamingResponse(body, 200, headers, media_type="application/octet-stream")
    start, end = wanted
    body = blobs.read(blob, start, end)
    headers["Content-Length"] = str(end - start)
    headers["Content-Range"] = f"bytes {start}-{end - 1}/{blob.size}"
    return StreamingResponse(body, 206, headers, media_type="application/octet-stream")
