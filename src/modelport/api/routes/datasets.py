"""/api/datasets: datasets as assets (create, publish versions, read, list)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import note_tenant, require_owner_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.datasets.types import Dataset, DatasetVersion
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["datasets"])


class CreateDataset(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str
    name: str
    visibility: str = "private"
    description: str = Field(default="", max_length=10_000)


class PublishDatasetVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    manifest: dict[str, Any]


def dataset_json(dataset: Dataset, latest: DatasetVersion | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "owner": dataset.owner,
        "name": dataset.name,
        "visibility": dataset.visibility,
        "description": dataset.description,
        "created_at": dataset.created_at.isoformat(),
    }
    if latest is not None:
        doc["latest"] = {"version": latest.version, "task": latest.task, "license": latest.license}
    return doc


def dataset_version_json(version: DatasetVersion) -> dict[str, Any]:
    return {
        "dataset": f"{version.owner}/{version.name}",
        "version": version.version,
        "digest": version.digest,
        "task": version.task,
        "license": version.license,
        "splits": [{"name": s.name, "rows": s.rows} for s in version.manifest.splits],
        "manifest": version.manifest.model_dump(mode="json"),
        "created_at": version.created_at.isoformat(),
        "created_by": version.created_by,
    }


@router.post("/datasets", status_code=201)
def create_dataset(
    datasets: deps.Datasets,
    body: CreateDataset,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """A new dataset in a tenant's namespace (409 ``dataset_exists``)."""
    note_tenant(request, body.owner)
    require_owner_tenant(request, principal, body.owner)
    dataset = datasets.create(
        principal,
        body.owner,
        body.name,
        visibility=body.visibility,
        description=body.description,
    )
    response.headers["Location"] = f"/api/datasets/{dataset.owner}/{dataset.name}"
    return dataset_json(dataset)


@router.get("/datasets")
def list_datasets(
    datasets: deps.Datasets,
    request: Request,
    principal: CurrentPrincipal,
    owner: str | None = None,
    task: str | None = None,
) -> dict[str, Any]:
    """The datasets the caller may see, each with its latest version."""
    found = datasets.listing(principal, owner=owner, task=task)
    return {"items": [dataset_json(d, v) for d, v in found]}


@router.get("/datasets/{owner}/{name}")
def get_dataset(
    datasets: deps.Datasets, owner: str, name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    dataset = datasets.require(principal, owner, name, Permission.MODEL_READ)
    versions = datasets.versions(principal, owner, name)
    return {
        **dataset_json(dataset, versions[-1] if versions else None),
        "versions": [dataset_version_json(v) for v in versions],
    }


@router.post("/datasets/{owner}/{name}/versions", status_code=201)
async def publish_dataset_version(
    datasets: deps.Datasets,
    owner: str,
    name: str,
    body: PublishDatasetVersion,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Publish an immutable version; the same manifest again answers 200, another one
    409 ``dataset_version_exists``."""
    note_tenant(request, owner)
    version, created = await anyio.to_thread.run_sync(
        datasets.publish, principal, owner, name, body.version, body.manifest
    )
    if not created:
        response.status_code = 200
    response.headers["Location"] = f"/api/datasets/{owner}/{name}/versions/{version.version}"
    return dataset_version_json(version)


@router.get("/datasets/{owner}/{name}/versions/{version}")
def get_dataset_version(
    datasets: deps.Datasets,
    owner: str,
    name: str,
    version: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    found = datasets.version(principal, owner, name, version)
    return dataset_version_json(found)
