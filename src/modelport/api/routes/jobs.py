"""/api/jobs: submit a job, follow it, list, cancel.

A job belongs to the submitting key's tenant; another tenant gets 404 ``job_not_found``
for it, exactly as for one that does not exist. Every route needs ``model.call`` in
the tenant (the platform operator sees every job, but submits none: a job runs as a
tenant's principal).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Header, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api.access import require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.deps import get_services
from modelport.api.openapi.problem import problems
from modelport.errors import InvalidInput
from modelport.jobs.service import JobService, Submission
from modelport.jobs.types import Job, JobState, Progress, StageSpec
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal

router = APIRouter(tags=["jobs"])
JOB_PATH = "/jobs/{job_id}"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetBody(_Body):
    model: str | None = Field(default=None, max_length=256, description="owner/name[:version]")
    endpoint: str | None = Field(default=None, max_length=256, description="An endpoint's name")


class StageBody(_Body):
    name: str = Field(min_length=1, max_length=64)
    implementation: str = Field(min_length=1, max_length=64)
    retries: int = Field(default=2, ge=0, le=20)
    backoff_seconds: float = Field(default=1.0, ge=0, le=3600)
    timeout_seconds: float = Field(default=300.0, gt=0, le=86_400)
    retryable: bool = True
    params: dict[str, Any] = Field(default_factory=dict)


class SubmitJob(_Body):
    target: TargetBody
    inputs: list[dict[str, Any]] | None = Field(
        default=None, description="Open Inference Protocol JSON tensors"
    )
    input_digest: str | None = Field(
        default=None,
        description="Or a blob your tenant uploaded, holding "
        '{"inputs": [...], "parameters"?, "outputs"?} as JSON',
    )
    parameters: dict[str, Any] | None = None
    outputs: list[str] | None = Field(default=None, description="Outputs to ask the model for")
    select: list[str] | None = Field(default=None, description="Outputs to keep, in order")
    rename: dict[str, str] | None = Field(default=None, description="Output name → new name")
    pipeline: list[StageBody] | None = Field(
        default=None,
        max_length=32,
        description="Stages to run (default: validate, infer, postprocess)",
    )
    webhook: str | None = Field(
        default=None, max_length=2048, description="Called when the job ends"
    )


def jobs(request: Request) -> JobService:
    return get_services(request).jobs


def _scope(request: Request, principal: Principal) -> str | None:
    """The tenant whose jobs the caller sees (None: the operator, every job)."""
    if principal.tenant is None and principal.is_admin:
        return None
    tenant = principal.tenant or ""
    require_tenant(request, principal, tenant, Permission.MODEL_CALL)
    return tenant


@router.post("/jobs", status_code=202, responses=problems(402, 429))
async def submit_job(
    body: SubmitJob,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> dict[str, Any]:
    """Queue a job; it runs in the background. Poll the ``Location`` (or give a
    ``webhook``). With an ``Idempotency-Key``, the same request again answers the same job
    (409 ``idempotency_key_reused`` for another request). 429 ``job_quota_exceeded``: the
    tenant has as many jobs queued and running as its ``jobs`` limit."""
    if principal.tenant is not None:
        require_tenant(request, principal, principal.tenant, Permission.MODEL_CALL)
    target = body.target
    if (target.model is None) == (target.endpoint is None):
        raise InvalidInput(
            "target: give one of 'model' or 'endpoint'", code="invalid_target", field="target"
        )
    submission = Submission(
        target_kind="model" if target.model is not None else "endpoint",
        target=target.model or target.endpoint or "",
        inputs=body.inputs,
        input_digest=body.input_digest,
        parameters=body.parameters,
        outputs=body.outputs,
        select=body.select,
        rename=body.rename,
        pipeline=None
        if body.pipeline is None
        else [StageSpec(**stage.model_dump()) for stage in body.pipeline],
        webhook=body.webhook,
        idempotency_key=idempotency_key,
    )
    service = jobs(request)
    job, _ = await anyio.to_thread.run_sync(service.submit, principal, submission)
    response.headers["Location"] = f"/api/jobs/{job.id}"
    return job_json(job)


@router.get("/jobs")
def list_jobs(
    request: Request,
    principal: CurrentPrincipal,
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"] | None = None,
    target: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    """Your tenant's jobs, newest first; pass ``next_cursor`` back as ``cursor`` for the
    next page. ``target``: a model ref or endpoint name exactly as submitted."""
    scope = _scope(request, principal)
    page = jobs(request).list(
        scope,
        state=None if state is None else JobState(state),
        target=target,
        cursor=cursor,
        limit=limit,
    )
    return {"items": [job_json(job) for job in page.items], "next_cursor": page.next_cursor}


@router.get(JOB_PATH)
def get_job(job_id: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """The job: its state, each stage's attempts, times and errors, and (once it
    succeeded) its outputs."""
    service = jobs(request)
    job = service.get(_scope(request, principal), job_id)
    return job_json(job, service.output(job), service.progress(job))


@router.post(JOB_PATH + ":cancel", status_code=202)
async def cancel_job(job_id: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """Stop the job at its next stage boundary (a queued job at once); 409
    ``job_finished`` when it already ended."""
    scope = _scope(request, principal)
    job = await anyio.to_thread.run_sync(jobs(request).cancel, scope, job_id)
    return job_json(job)


def job_json(
    job: Job, output: dict[str, Any] | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    kind = job.target_kind if job.target_kind in ("model", "batch") else "endpoint"
    body: dict[str, Any] = {
        "id": job.id,
        "tenant": job.tenant,
        "state": job.state.value,
        "target": {kind: job.target},
        "input_digest": job.input_digest,
        "webhook": job.webhook,
        "cancel_requested": job.cancel_requested,
        "created_at": job.created_at.isoformat(),
        "started_at": None if job.started_at is None else job.started_at.isoformat(),
        "finished_at": None if job.finished_at is None else job.finished_at.isoformat(),
        "error": None
        if job.error_code is None
        else {"code": job.error_code, "message": job.error_message},
        "output_digest": job.output_digest,
        "stages": [
            {
                "name": run.name,
                "implementation": run.implementation,
                "state": run.state.value,
                "attempts": run.attempts,
                "started_at": None if run.started_at is None else run.started_at.isoformat(),
                "finished_at": None if run.finished_at is None else run.finished_at.isoformat(),
                "error": None
                if run.error_code is None
                else {"code": run.error_code, "message": run.error_message},
                "output_digest": run.output_digest,
            }
            for run in job.stages
        ],
    }
    if progress is not None:
        estimate = progress.estimated_completion
        body["progress"] = {
            "rows_total": progress.rows_total,
            "rows_done": progress.rows_done,
            "rows_failed": progress.rows_failed,
            "estimated_completion": None if estimate is None else estimate.isoformat(),
        }
    if output is not None and "shards" in output:
        body["manifest"] = output  # a batch's output manifest
    elif output is not None:
        body["outputs"] = output.get("outputs", [])
        body["model"] = output.get("model")
        body["version"] = output.get("version")
    return body
