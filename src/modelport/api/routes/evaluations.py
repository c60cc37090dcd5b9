"""/api/evaluations, a model's evaluations and claims, and /api/leaderboards."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import note_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.openapi.problem import problems
from modelport.evaluations.types import BoardEntry, Claim, Evaluation, NewEvaluation

router = APIRouter(tags=["evaluations"])


class SubmitEvaluation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, description="owner/name (or name an endpoint)")
    version: str | None = Field(
        default=None, description="a version or alias; the latest if absent"
    )
    endpoint: str | None = Field(
        default=None,
        description="an endpoint evaluated through its routing, instead of a model",
    )
    dataset: str = Field(description="owner/name")
    dataset_version: str
    split: str
    output: str | None = Field(default=None, description="the output scored; the first if absent")
    publish: bool = Field(default=True, description="shown on the leaderboard")


class SubmitClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str
    dataset_version: str
    split: str
    metrics: dict[str, float]


def evaluation_json(evaluation: Evaluation) -> dict[str, Any]:
    return {
        "id": evaluation.id,
        "kind": evaluation.kind.value,
        "verified": evaluation.kind.value == "verified",
        "state": evaluation.state.value,
        "model": evaluation.model,
        "version": evaluation.model_version,
        "version_digest": evaluation.version_digest,
        "dataset": evaluation.dataset,
        "dataset_version": evaluation.dataset_version,
        "dataset_digest": evaluation.dataset_digest,
        "split": evaluation.split,
        "task": evaluation.task,
        "output": evaluation.output or None,
        "endpoint": evaluation.endpoint,
        "served": [s.to_doc() for s in evaluation.served],
        "version_score": evaluation.version_score,
        "published": evaluation.published,
        "metrics": evaluation.metrics,
        "rows": evaluation.rows,
        "latency_ms": evaluation.latency_ms,
        "job_id": evaluation.job_id,
        "error": None
        if evaluation.error_code is None
        else {"code": evaluation.error_code, "message": evaluation.error_message},
        "tenant": evaluation.tenant,
        "created_at": evaluation.created_at.isoformat(),
        "finished_at": None
        if evaluation.finished_at is None
        else evaluation.finished_at.isoformat(),
    }


def entry_json(entry: BoardEntry) -> dict[str, Any]:
    e = entry.evaluation
    return {
        "rank": entry.rank,
        "verified": entry.rank is not None,
        "score": entry.score,
        "model": e.model,
        "version": e.model_version,
        "version_digest": e.version_digest,
        "dataset_version": e.dataset_version,
        "dataset_digest": e.dataset_digest,
        "split": e.split,
        "metrics": e.metrics,
        "latency_ms": e.latency_ms,
        "rows": e.rows,
        "price": entry.price.to_doc(),
        "endpoint": e.endpoint,
        "served": [s.to_doc() for s in e.served],
        "evaluation": e.id,
    }


@router.post("/evaluations", status_code=202, responses=problems(402, 429))
async def submit_evaluation(
    evaluations: deps.Evaluations,
    body: SubmitEvaluation,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Evaluate a model version, or an endpoint through its routing, on a dataset split,
    as a job of the caller's tenant (metered and billed as any job). 400
    ``invalid_target`` (a model and an endpoint, or neither), ``unknown_split``,
    ``column_mismatch``, ``task_mismatch``, ``unknown_output``; 404 for a dataset, model
    or endpoint the caller may not read or call."""
    evaluation = await evaluations.submit(
        principal,
        NewEvaluation(
            model=body.model,
            version=body.version,
            endpoint=body.endpoint,
            dataset=body.dataset,
            dataset_version=body.dataset_version,
            split=body.split,
            output=body.output,
            publish=body.publish,
        ),
    )
    response.headers["Location"] = f"/api/evaluations/{evaluation.id}"
    return evaluation_json(evaluation)


@router.get("/evaluations/{evaluation_id}")
def get_evaluation(
    evaluations: deps.Evaluations, evaluation_id: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    return evaluation_json(evaluations.get(principal, evaluation_id))


@router.get("/models/{owner}/{name}/evaluations")
def model_evaluations(
    evaluations: deps.Evaluations,
    owner: str,
    name: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """A model's evaluations the caller may read, verified and claimed, newest first."""
    found = evaluations.of_model(principal, owner, name)
    return {"items": [evaluation_json(e) for e in found]}


@router.post("/models/{owner}/{name}/versions/{version}/claims", status_code=201)
async def claim_scores(
    evaluations: deps.Evaluations,
    owner: str,
    name: str,
    version: str,
    body: SubmitClaim,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """A publisher's own scores for its version: shown apart from verified ones."""
    note_tenant(request, owner)
    claim = Claim(
        model=f"{owner}/{name}",
        version=version,
        dataset=body.dataset,
        dataset_version=body.dataset_version,
        split=body.split,
        metrics=body.metrics,
    )
    made = await anyio.to_thread.run_sync(evaluations.claim, principal, claim)
    return evaluation_json(made)


@router.get("/leaderboards")
def list_leaderboards(
    evaluations: deps.Evaluations, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Every board with a published score, on datasets the caller may see."""
    boards = evaluations.boards(principal)
    return {"items": [{"task": task, "dataset": dataset} for task, dataset in boards]}


@router.get("/leaderboards/{task}/{owner}/{name}")
def get_leaderboard(
    evaluations: deps.Evaluations,
    task: str,
    owner: str,
    name: str,
    request: Request,
    principal: CurrentPrincipal,
    split: str | None = None,
) -> dict[str, Any]:
    """Verified evaluations ranked by the task's score, with price and latency beside it;
    publishers' claims apart, and endpoint evaluations several versions served."""
    board = evaluations.leaderboard(principal, task, f"{owner}/{name}", split)
    return board.to_doc(entry_json)
