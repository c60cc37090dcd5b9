"""OpenAI's Batch API on ``/v1/batches``, for the official ``openai`` SDK:

- ``POST /v1/batches`` ``{input_file_id, endpoint, completion_window: "24h",
  metadata}``: a batch over a ``batch`` file of the key's tenant (a job, ``jobs.batch``);
  ``shard_rows`` (not OpenAI's; default 1,000) sets the lines a shard checkpoints;
- ``GET /v1/batches/{id}``, ``GET /v1/batches`` (``limit``, ``after``; newest first),
  ``POST /v1/batches/{id}/cancel``.

The batch object's ``status`` follows its job: ``validating`` (queued),
``in_progress`` (running its shards), ``finalizing`` (publishing), ``completed``,
``failed``, ``cancelling`` (a cancel asked of a running batch), ``cancelled``, and
``expired``: its ``completion_window`` closed first (``jobs.batch``); the requests it
never ran are ``batch_expired`` lines of its error file, the answered ones in its
output file. Its
``output_file_id`` and ``error_file_id`` appear once published, together. Another
tenant's batch is 404 ``batch_not_found``, as a missing one is.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from modelport.api import deps
from modelport.api.openai.files import tenant_principal
from modelport.api.openai.requests import load_json
from modelport.api.openai.routes import json_response
from modelport.errors import InvalidInput, PayloadTooLarge
from modelport.jobs.batch import COMPLETION_WINDOWS, SHARD_ROWS, BatchService, NewBatch
from modelport.jobs.types import BatchRecord, JobState

MAX_BODY = 64 * 1024


def _stamp(value: Any) -> int | None:
    return None if value is None else int(value.timestamp())


def _status(record: BatchRecord) -> str:
    job = record.job
    if job.state is JobState.QUEUED:
        return "validating"
    if job.state is JobState.RUNNING:
        if job.cancel_requested:
            return "cancelling"
        return "in_progress" if job.stage == 0 else "finalizing"
    if record.expired and job.state is JobState.SUCCEEDED:
        return "expired"
    return {
        JobState.SUCCEEDED: "completed",
        JobState.FAILED: "failed",
        JobState.CANCELLED: "cancelled",
    }[job.state]


def batch_object(record: BatchRecord) -> dict[str, Any]:
    """OpenAI's batch object."""
    job = record.job
    status = _status(record)
    publish = job.stages[1] if len(job.stages) > 1 else None
    errors = None
    if job.state is JobState.FAILED:
        errors = {
            "object": "list",
            "data": [
                {
                    "code": job.error_code,
                    "message": job.error_message,
                    "param": None,
                    "line": None,
                }
            ],
        }
    ended = _stamp(job.finished_at)
    return {
        "id": record.id,
        "object": "batch",
        "endpoint": record.endpoint,
        "errors": errors,
        "input_file_id": record.input_file_id,
        "completion_window": record.completion_window,
        "status": status,
        "output_file_id": record.output_file_id,
        "error_file_id": record.error_file_id,
        "created_at": _stamp(record.created_at),
        "in_progress_at": _stamp(job.started_at),
        "expires_at": _stamp(record.created_at + COMPLETION_WINDOWS[record.completion_window]),
        "finalizing_at": _stamp(publish.started_at) if publish is not None else None,
        "completed_at": ended if status == "completed" else None,
        "failed_at": ended if status == "failed" else None,
        "expired_at": ended if status == "expired" else None,
        "cancelling_at": None,
        "cancelled_at": ended if status == "cancelled" else None,
        "request_counts": {
            "total": record.total,
            "completed": record.done - record.failed,
            "failed": record.failed,
        },
        "metadata": record.metadata,
    }


def _batches(request: Request) -> BatchService:
    return deps.batches_service(request)


async def create_batch(request: Request) -> Response:
    principal, _ = await tenant_principal(request)
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise PayloadTooLarge(f"the body is above {MAX_BODY} bytes", code="payload_too_large")
    doc = load_json(raw)
    input_file_id, endpoint = doc.get("input_file_id"), doc.get("endpoint")
    window, metadata = doc.get("completion_window", "24h"), doc.get("metadata")
    if not isinstance(input_file_id, str):
        raise InvalidInput(
            "input_file_id is required", code="missing_input_file", param="input_file_id"
        )
    if not isinstance(endpoint, str):
        raise InvalidInput("endpoint is required", code="missing_endpoint", param="endpoint")
    if not isinstance(window, str):
        raise InvalidInput(
            "completion_window must be '24h'",
            code="invalid_completion_window",
            param="completion_window",
        )
    shard_rows = doc.get("shard_rows", SHARD_ROWS)
    if not isinstance(shard_rows, int) or isinstance(shard_rows, bool):
        raise InvalidInput("shard_rows must be an integer", code="invalid_shard_rows")
    new = NewBatch(input_file_id, endpoint, window, metadata, shard_rows)
    record = await anyio.to_thread.run_sync(_batches(request).create, principal, new)
    return json_response(batch_object(record))


async def get_batch(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    batch_id = request.path_params["batch_id"]
    record = await anyio.to_thread.run_sync(_batches(request).get, tenant, batch_id)
    return json_response(batch_object(record))


async def cancel_batch(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    batch_id = request.path_params["batch_id"]
    record = await anyio.to_thread.run_sync(_batches(request).cancel, tenant, batch_id)
    return json_response(batch_object(record))


async def list_batches(request: Request) -> Response:
    _, tenant = await tenant_principal(request)
    query = request.query_params
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        raise InvalidInput("limit must be an integer", code="invalid_limit") from None
    page = await anyio.to_thread.run_sync(
        lambda: _batches(request).list(tenant, after=query.get("after"), limit=limit)
    )
    data = [batch_object(r) for r in page.items]
    return json_response(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": page.has_more,
        }
    )


routes: list[BaseRoute] = [
    Route("/v1/batches", create_batch, methods=["POST"]),
    Route("/v1/batches", list_batches, methods=["GET"]),
    Route("/v1/batches/{batch_id}", get_batch, methods=["GET"]),
    Route("/v1/batches/{batch_id}/cancel", cancel_batch, methods=["POST"]),
]
"""The ``/v1/batches`` routes, mounted by ``api.app`` with the other ``/v1`` routes."""
