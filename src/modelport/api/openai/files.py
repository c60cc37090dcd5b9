"""OpenAI's Files API on ``/v1/files``: a tenant uploads a batch's requests (or any file a
job reads), lists, reads and deletes its files, with the official ``openai`` SDK.

- ``POST /v1/files``: multipart ``file`` and ``purpose`` (``batch`` or ``user_data``);
  a ``batch`` file is checked line by line and refused whole (400
  ``invalid_batch_file``, naming the line) before anything is stored;
- ``GET /v1/files`` (``purpose``, ``limit``, ``order``, ``after``), ``GET
  /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``.

Files belong to the key's tenant (``model.call``: they are the input of calls); another
tenant's file is 404 ``file_not_found``, as a missing one is.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from modelport.api import deps
from modelport.api.access import require_tenant
from modelport.api.auth import require_principal_async
from modelport.api.openai.routes import json_response
from modelport.errors import InvalidInput, PayloadTooLarge
from modelport.files import FileObject, FileService
from modelport.tenancy import Permission, Principal

_READ = 1 << 20


def file_object(file: FileObject) -> dict[str, Any]:
    """OpenAI's file object."""
    return {
        "id": file.id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": int(file.created_at.timestamp()),
        "filename": file.filename,
        "purpose": file.purpose.value,
        "status": "processed",
        "status_details": None,
        "expires_at": None,
    }


async def tenant_principal(request: Request) -> tuple[Principal, str]:
    """The key's principal and its tenant (``model.call`` in it): what a file or batch
    belongs to; the admin key, which has none, is ``tenant_required``."""
    principal = await require_principal_async(request)
    if principal.tenant is None:
        raise InvalidInput(
            "files belong to a tenant: call with a tenant's API key", code="tenant_required"
        )
    require_tenant(request, principal, principal.tenant, Permission.MODEL_CALL)
    return principal, principal.tenant


def _files(request: Request) -> FileService:
    return deps.files_service(request)


async def _read(upload: UploadFile, limit: int) -> bytes:
    chunks, size = [], 0
    while chunk := await upload.read(_READ):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(
                f"the file is above the limit of {limit} bytes", code="file_too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def create_file(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    files = _files(request)
    async with request.form(max_files=1, max_fields=4) as form:
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, UploadFile):
            raise InvalidInput("the form needs a 'file' part", code="missing_file", param="file")
        if not isinstance(purpose, str):
            raise InvalidInput(
                "the form needs a 'purpose' field", code="missing_purpose", param="purpose"
            )
        data = await _read(upload, files.max_bytes)
        name = upload.filename or "upload"
    stored = await anyio.to_thread.run_sync(files.create, tenant, purpose, name, data)
    return json_response(file_object(stored))


async def list_files(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidInput("order must be 'asc' or 'desc'", code="invalid_order", param="order")
    try:
        limit = int(query.get("limit", "10000"))
    except ValueError:
        raise InvalidInput("limit must be an integer", code="invalid_limit") from None
    page = await anyio.to_thread.run_sync(
        lambda: _files(request).list(
            tenant,
            purpose=query.get("purpose"),
            after=query.get("after"),
            limit=limit,
            newest_first=order == "desc",
        )
    )
    data = [file_object(f) for f in page.files]
    return json_response(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": page.has_more,
        }
    )


async def get_file(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    file_id = request.path_params["file_id"]
    file = await anyio.to_thread.run_sync(_files(request).get, tenant, file_id)
    return json_response(file_object(file))


async def file_content(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    file_id = request.path_params["file_id"]
    file, chunks = await anyio.to_thread.run_sync(_files(request).content, tenant, file_id)
    headers = {"Content-Length": str(file.bytes)}
    return StreamingResponse(chunks, media_type="application/octet-stream", headers=headers)


async def delete_file(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    file_id = request.path_params["file_id"]
    await anyio.to_thread.run_sync(_files(request).delete, tenant, file_id)
    return json_response({"id": file_id, "object": "file", "deleted": True})


routes: list[BaseRoute] = [
    Route("/v1/files", create_file, methods=["POST"]),
    Route("/v1/files", list_files, methods=["GET"]),
    Route("/v1/files/{file_id}", get_file, methods=["GET"]),
    Route("/v1/files/{file_id}", delete_file, methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", file_content, methods=["GET"]),
]
"""The ``/v1/files`` routes, mounted by ``api.app`` with the other ``/v1`` routes."""
