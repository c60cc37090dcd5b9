"""/api/uploads: resumable blob uploads (OCI distribution spec semantics).

``POST`` starts one (or, with ``?digest=``, uploads a blob in a single request),
``PATCH`` appends a chunk at the offset its ``Content-Range`` names, ``GET`` tells the
offset, ``PUT ?digest=`` commits (optionally with a last chunk), ``DELETE`` aborts.
Bodies are streamed to staging, never held whole in memory.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import anyio
import anyio.to_thread
import orjson
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from modelport.api import deps
from modelport.api.access import Uploader
from modelport.api.openapi import problems
from modelport.blobs.types import Blob, Upload
from modelport.blobs.uploads import ChunkAppend, UploadService
from modelport.digests import check_digest
from modelport.errors import InvalidInput

router = APIRouter(tags=["uploads"])

BATCH_BYTES = 1 << 20
"""Request body pieces are gathered to about this much before each write to staging."""


class UploadState(BaseModel):
    """Where an upload is (also in the ``Range`` and ``Upload-Offset`` headers)."""

    id: str
    offset: int = Field(description="Bytes received so far: the next chunk starts here")
    location: str = Field(description="The upload's URL (also in `Location`)")
    expires_at: str = Field(description="When an idle upload is dropped (ISO 8601)")


class BlobRef(BaseModel):
    """A committed blob (also in the ``Location`` and ``Blob-Digest`` headers)."""

    digest: str = Field(description="`sha256:<64 hex>`")
    size: int
    location: str = Field(description="Where to download it")


_CHUNK = {
    "requestBody": {
        "required": False,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}
_BLOB = {"model": BlobRef, "description": "The committed blob"}
_CONTENT_RANGE = re.compile(r"^(?:bytes[ =])?(\d+)-(\d+)(?:/(?:\*|\d+))?$")


def parse_content_range(header: str | None) -> tuple[int | None, int | None]:
    """``<start>-<end>`` (OCI) or ``bytes <start>-<end>/<total or *>`` → (start, length)."""
    if header is None:
        return None, None
    match = _CONTENT_RANGE.match(header.strip())
    if not match or int(match[2]) < int(match[1]):
        raise InvalidInput(
            f"invalid Content-Range {header!r}: expected '<start>-<end>' (inclusive)",
            code="invalid_content_range",
        )
    start, end = int(match[1]), int(match[2])
    return start, end - start + 1


def content_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    if value is None:
        return None
    if not value.isdigit():
        raise InvalidInput(f"invalid Content-Length {value!r}", code="invalid_request")
    return int(value)


def has_body(request: Request) -> bool:
    return (
        bool(content_length(request))
        or "chunked" in request.headers.get("transfer-encoding", "").lower()
    )


def declared_chunk(request: Request) -> tuple[int | None, int | None]:
    """Where the request's chunk starts and how long it says it is (None: not said)."""
    start, length = parse_content_range(request.headers.get("content-range"))
    declared = content_length(request)
    if length is not None and declared is not None and declared != length:
        raise InvalidInput(
            f"Content-Range covers {length} bytes but Content-Length is {declared}",
            code="chunk_length_mismatch",
        )
    return start, length if length is not None else declared


async def receive_chunk(uploads: UploadService, upload_id: str, request: Request) -> Upload:
    """Stream the request body into the upload as one chunk."""
    start, length = declared_chunk(request)
    chunk: ChunkAppend = await anyio.to_thread.run_sync(
        lambda: uploads.begin_chunk(upload_id, start, length=length)
    )
    try:
        batch = bytearray()
        async for piece in request.stream():
            batch += piece
            if len(batch) >= BATCH_BYTES:
                await anyio.to_thread.run_sync(chunk.write, batch)
                batch = bytearray()
        if batch:
            await anyio.to_thread.run_sync(chunk.write, batch)
        return await anyio.to_thread.run_sync(chunk.finish)
    except ClientDisconnect:
        raise InvalidInput(
            "the client went away in the middle of the chunk; it was dropped",
            code="incomplete_chunk",
        ) from None
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(chunk.abort)


def _json(status: int, body: dict[str, Any], headers: dict[str, str]) -> Response:
    return Response(orjson.dumps(body), status, headers=headers, media_type="application/json")


def upload_response(upload: Upload, status: int) -> Response:
    location = f"/api/uploads/{upload.id}"
    headers = {
        "Location": location,
        "Range": f"0-{max(upload.offset - 1, 0)}",
        "Upload-Offset": str(upload.offset),
    }
    body = {
        "id": upload.id,
        "offset": upload.offset,
        "location": location,
        "expires_at": upload.expires_at.isoformat(),
    }
    return _json(status, body, headers)


def blob_response(blob: Blob) -> Response:
    location = f"/api/blobs/{blob.digest}"
    headers = {"Location": location, "Blob-Digest": blob.digest}
    return _json(201, {"digest": blob.digest, "size": blob.size, "location": location}, headers)


@router.post(
    "/uploads",
    status_code=202,
    response_model=UploadState,
    responses={201: _BLOB, **problems(416)},
    openapi_extra=_CHUNK,
)
async def start_upload(
    uploads: deps.Uploads,
    request: Request,
    principal: Uploader,
    digest: str | None = Query(default=None),
) -> Response:
    """Start an upload (202); with ``?digest=`` and a body, upload a whole blob (201).
    Its commit records the caller's tenant as holding the blob."""
    if digest is not None:
        check_digest(digest)
    upload = await anyio.to_thread.run_sync(uploads.start, principal.tenant)
    if digest is None:
        return upload_response(upload, 202)
    try:
        await receive_chunk(uploads, upload.id, request)
        blob = await anyio.to_thread.run_sync(uploads.commit, upload.id, digest)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_abort_quietly, uploads, upload.id)
        raise
    return blob_response(blob)


def _abort_quietly(uploads: UploadService, upload_id: str) -> None:
    # Already gone, or the store failed: either way expiry cleans up what is left.
    with contextlib.suppress(Exception):
        uploads.abort(upload_id)


@router.get("/uploads/{upload_id}", response_model=UploadState)
def upload_status(uploads: deps.Uploads, upload_id: str, request: Request, _: Uploader) -> Response:
    """Where an upload is: ``Range: 0-<last byte>`` and ``offset`` (bytes received)."""
    return upload_response(uploads.get(upload_id), 200)


@router.patch(
    "/uploads/{upload_id}",
    status_code=202,
    response_model=UploadState,
    responses=problems(408, 413, 416),
    openapi_extra=_CHUNK,
)
async def append_chunk(
    uploads: deps.Uploads, upload_id: str, request: Request, _: Uploader
) -> Response:
    """Append the body at ``Content-Range: <start>-<end>``; 416 ``offset_mismatch`` if
    ``start`` is not the upload's offset (the current one is in ``Upload-Offset``)."""
    upload = await receive_chunk(uploads, upload_id, request)
    return upload_response(upload, 202)


@router.put(
    "/uploads/{upload_id}",
    status_code=201,
    response_model=BlobRef,
    responses=problems(408, 413, 416),
    openapi_extra=_CHUNK,
)
async def commit_upload(
    uploads: deps.Uploads,
    upload_id: str,
    request: Request,
    _: Uploader,
    digest: str = Query(default=""),
) -> Response:
    """Commit the upload as the blob ``digest`` (a last chunk may come in the body)."""
    if not digest:
        raise InvalidInput("a commit needs ?digest=sha256:<hex>", code="invalid_digest")
    check_digest(digest)
    if has_body(request):
        await receive_chunk(uploads, upload_id, request)
    blob = await anyio.to_thread.run_sync(uploads.commit, upload_id, digest)
    return blob_response(blob)


@router.delete("/uploads/{upload_id}", status_code=204)
def abort_upload(uploads: deps.Uploads, upload_id: str, request: Request, _: Uploader) -> Response:
    """Abort an upload and drop its staged bytes."""
    uploads.abort(upload_id)
    return Response(status_code=204)
