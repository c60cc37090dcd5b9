"""/api/jobs: submit a job, follow it, list, cancel, download its outputs.

A job belongs to the submitting key's tenant; another tenant gets 404 ``job_not_found``
for it, exactly as for one that does not exist. Every route needs ``model.call`` in
the tenant (the platform operator sees every job, but submits none: a job runs as a
tenant's principal), but ``GET /api/jobs/{id}/outputs/{digest}`` with a signed URL's
``expires`` and ``signature``: the signature is the credential.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

import anyio.to_thread
from fastapi import APIRouter, Header, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import StreamingResponse

from modelport.api import deps
from modelport.api.access import require_tenant
from modelport.api.auth import CurrentPrincipal, require_principal
from modelport.api.openapi.problem import problems
from modelport.api.routes.blobs import blob_headers
from modelport.errors import InvalidInput
from modelport.jobs.outputs import JobOutput
from modelport.jobs.service import JobService, Submission
from modelport.jobs.signing import SignedOutput
from modelport.jobs.types import Job, JobState, Progress, StageSpec
from modelport.jobs.validation import KIND as VALIDATION
from modelport.jobs.validation import links as validation_links
from modelport.tenancy.policy import Permission, permissions_of
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


class DatasetInputBody(_Body):
    dataset: str = Field(max_length=300, description="owner/name:version")
    split: str = Field(max_length=64, description="The split whose rows are the input")


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
    input_dataset: DatasetInputBody | None = Field(
        default=None,
        description="Or a dataset split you may read, for a tensor batch (tensor_shards)",
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
    return deps.jobs_service(request)


def _scope(request: Request, principal: Principal) -> str | None:
    """The tenant whose jobs the caller sees (None: the operator, every job)."""
    if principal.tenant is None and principal.is_admin:
        return None
    tenant = principal.tenant or ""
    require_tenant(request, principal, tenant, Permission.MODEL_CALL)
    return tenant


def _read_scope(request: Request, principal: Principal) -> tuple[str | None, str | None]:
    """``_scope``, and the one kind of job the caller may see (None: every kind): a
    member who may register models but not call them (a publisher) sees the tenant's
    validations only, which its transitions started."""
    tenant = principal.tenant
    if tenant is not None and Permission.MODEL_CALL not in permissions_of(principal):
        require_tenant(request, principal, tenant, Permission.MODEL_REGISTER)
        return tenant, VALIDATION
    return _scope(request, principal), None


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
        dataset=None if body.input_dataset is None else body.input_dataset.dataset,
        split=None if body.input_dataset is None else body.input_dataset.split,
    )
    service = jobs(request)
    job, _ = await service.submit_checked(principal, submission)
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
    next page. ``target``: a model ref or endpoint name exactly as submitted (a
    validation's: ``owner/name:version``). A publisher sees its tenant's validations."""
    scope, kind = _read_scope(request, principal)
    page = jobs(request).list(
        scope,
        state=None if state is None else JobState(state),
        target=target,
        kind=kind,
        cursor=cursor,
        limit=limit,
    )
    return {"items": [job_json(job) for job in page.items], "next_cursor": page.next_cursor}


@router.get(JOB_PATH)
def get_job(
    jobs: deps.Jobs,
    job_outputs: deps.JobOutputs,
    job_id: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """The job: its state, each stage's attempts, times and errors, and (once it
    succeeded) its outputs."""
    scope, kind = _read_scope(request, principal)
    job = jobs.get(scope, job_id, kind=kind)
    output = job_outputs.output(job)
    return job_json(job, output, jobs.progress(job), output_url(request, job.id))


@router.get(
    JOB_PATH + "/outputs/{digest}",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The output's bytes",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        },
        **problems(403, 404, 410),
    },
)
def get_job_output(
    job_outputs: deps.JobOutputs,
    job_id: str,
    digest: str,
    request: Request,
    expires: str | None = None,
    signature: str | None = None,
) -> Response:
    """Stream one of the job's outputs: with a signed URL's ``expires`` and
    ``signature`` (no key needed; 403 ``invalid_signature``, 403 ``url_expired``), or
    with a key of the job's tenant. 404 ``output_not_found`` for a digest that is not
    one of the job's outputs; 410 ``erased`` once the job's inputs and outputs were
    erased (its tenant's retention, or the right to deletion)."""
    outputs = job_outputs
    if expires is not None or signature is not None:
        blob, body = outputs.open_signed(job_id, digest, expires or "", signature or "")
    else:
        scope = _scope(request, require_principal(request))
        blob, body = outputs.open(scope, job_id, digest)
    headers = blob_headers(blob) | {
        "Content-Length": str(blob.size),
        "Cache-Control": "private, no-store",  # the URL expires; the copy should too
    }
    return StreamingResponse(body, 200, headers, media_type="application/octet-stream")


@router.post(JOB_PATH + ":cancel", status_code=202)
async def cancel_job(job_id: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """Stop the job at its next stage boundary (a queued job at once); 409
    ``job_finished`` when it already ended."""
    scope, kind = _read_scope(request, principal)
    job = await anyio.to_thread.run_sync(partial(jobs(request).cancel, scope, job_id, kind=kind))
    return job_json(job)


_KINDS = {"batch": "batch", VALIDATION: "validation"}
"""A job's ``kind`` by its target kind (else ``inference``: a model or an endpoint)."""

URLFor = Callable[[str, SignedOutput | None], str | None]
"""A signed output URL of one job: (digest, signature) → URL (None: no signature)."""


def output_url(request: Request, job_id: str) -> URLFor:
    base = str(request.base_url).rstrip("/")

    def url(digest: str, signed: SignedOutput | None) -> str | None:
        if signed is None:
            return None
        query = urlencode({"expires": signed.expires, "signature": signed.signature})
        return f"{base}/api/jobs/{quote(job_id, safe='')}/outputs/{digest}?{query}"

    return url


def _output_json(output: JobOutput, url: URLFor) -> dict[str, Any]:
    return {
        "digest": output.digest,
        "size": output.size,
        "inline": output.document is not None,
        "url": url(output.digest, output.signed),
    }


def _signed_manifest(manifest: dict[str, Any], output: JobOutput, url: URLFor) -> dict[str, Any]:
    """A batch manifest with a ``url`` beside each shard blob it names."""
    shards = []
    for shard in manifest.get("shards", []):
        shard = dict(shard)
        for key, name in (("digest", "url"), ("output", "output_url"), ("errors", "errors_url")):
            digest = shard.get(key)
            if isinstance(digest, str) and digest in output.shards:
                shard[name] = url(digest, output.shards[digest])
        shards.append(shard)
    return {**manifest, "shards": shards}


def job_json(
    job: Job,
    output: JobOutput | None = None,
    progress: Progress | None = None,
    url: URLFor | None = None,
) -> dict[str, Any]:
    kind = job.target_kind if job.target_kind in ("model", "batch") else "endpoint"
    if job.target_kind == VALIDATION:
        kind = "version"
    body: dict[str, Any] = {
        "id": job.id,
        "kind": _KINDS.get(job.target_kind, "inference"),
        "tenant": job.tenant,
        "state": job.state.value,
        "target": {kind: job.target},
        "input_digest": job.input_digest,
        "input_dataset": job.input_dataset,
        "webhook": job.webhook,
        "cancel_requested": job.cancel_requested,
        "created_at": job.created_at.isoformat(),
        "started_at": None if job.started_at is None else job.started_at.isoformat(),
        "finished_at": None if job.finished_at is None else job.finished_at.isoformat(),
        "error": None
        if job.error_code is None
        else {"code": job.error_code, "message": job.error_message},
        "output_digest": job.output_digest,
        "erased_at": None if job.erased_at is None else job.erased_at.isoformat(),
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
    if job.target_kind == VALIDATION:
        body["links"] = validation_links(job)
    if progress is not None:
        estimate = progress.estimated_completion
        body["progress"] = {
            "rows_total": progress.rows_total,
            "rows_done": progress.rows_done,
            "rows_failed": progress.rows_failed,
            "estimated_completion": None if estimate is None else estimate.isoformat(),
        }
    if output is None:
        return body
    url = url or (lambda digest, signed: None)
    body["output"] = _output_json(output, url)
    document = output.document
    if document is not None and job.target_kind == VALIDATION:
        body["result"] = document  # the version's new state and its lifecycle event
    elif document is not None and "shards" in document:
        body["manifest"] = _signed_manifest(document, output, url)  # a batch's manifest
    elif document is not None:
        body["outputs"] = document.get("outputs", [])
        body["model"] = document.get("model")
        body["version"] = document.get("version")
    return body
