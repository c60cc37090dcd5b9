"""/api/models: register models and browse the catalog."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import catalog_viewer, require_model, require_namespace
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.registry_json import model_json
from modelport.registry.catalog import MAX_LIMIT
from modelport.registry.facets import PRICE_BANDS
from modelport.registry.scores import SCORE_BUCKETS
from modelport.registry.types import CatalogQuery
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["models"])


class CreateModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str
    name: str
    task: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    license: str | None = Field(default=None, description="SPDX identifier or expression")
    visibility: str | None = None


@router.get("/models")
def list_models(
    registry: deps.Registry,
    request: Request,
    principal: CurrentPrincipal,
    q: Annotated[
        str | None,
        Query(
            max_length=256,
            description="words to find in names, tags, tasks, descriptions and model "
            "cards; ranks the answer (an exact name first) and adds facets",
        ),
    ] = None,
    task: str | None = None,
    license: str | None = None,
    tag: str | None = None,
    owner: str | None = None,
    format: str | None = None,
    price: Annotated[str | None, Query(description="price band: " + ", ".join(PRICE_BANDS))] = None,
    score: Annotated[
        str | None, Query(description="verified score bucket: " + ", ".join(SCORE_BUCKETS))
    ] = None,
    min_score: Annotated[
        float | None,
        Query(
            allow_inf_nan=False,
            description="the least verified leaderboard score on the model's task metric "
            "(the most, for a metric better lower such as MAE)",
        ),
    ] = None,
    facets: Annotated[
        bool, Query(description="count the matches by facet (always with q)")
    ] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The catalog, filtered to what the caller may see; pass ``next_cursor`` back as
    ``cursor`` for the next page. With ``q`` (or ``facets``) the answer also holds
    ``facets``, ``total`` and, when nothing matched, ``suggestions``."""
    page = registry.search(
        CatalogQuery(
            q=q,
            task=task,
            license=license,
            tag=tag,
            owner=owner,
            format=format,
            price=price,
            score=score,
            min_score=min_score,
            facets=facets,
            limit=limit,
            cursor=cursor,
            viewer=catalog_viewer(request, principal),
        )
    )
    answer: dict[str, Any] = {
        "items": [model_json(m) for m in page.items],
        "next_cursor": page.next_cursor,
    }
    if page.facets is not None:
        answer["facets"] = {
            name: [{"value": f.value, "count": f.count} for f in counts]
            for name, counts in page.facets.items()
        }
        answer["total"] = page.total
        answer["suggestions"] = list(page.suggestions)
    return answer


@router.post("/models", status_code=201)
def create_model(
    registry: deps.Registry,
    body: CreateModel,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    require_namespace(request, principal, body.owner, Permission.MODEL_REGISTER)
    model = registry.create_model(
        body.owner,
        body.name,
        actor=principal.id,
        task=body.task or "",
        description=body.description or "",
        tags=body.tags or [],
        license=body.license,
        visibility=body.visibility or "private",
    )
    response.headers["Location"] = f"/api/models/{model.owner}/{model.name}"
    return model_json(model)


@router.get("/models/{owner}/{name}")
def get_model(
    owner: str, name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    return model_json(require_model(request, principal, owner, name, Permission.MODEL_READ))
