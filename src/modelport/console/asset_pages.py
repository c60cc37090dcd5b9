"""Datasets and prompt templates: the ones the signed-in key may see (``GET /api/datasets``,
``GET /api/templates``: public ones, granted ones, and the tenant's own, drafts
included), and one asset's page (its versions with digest and license; the chosen
version's manifest: a dataset's task, splits and columns, a template's messages and
variables). Read-only: assets are created and published over the API or the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from modelport.console.web import current_session, platform, refusal, render

router = APIRouter()


@dataclass(frozen=True)
class AssetKind:
    """What differs between the two kinds of asset on their pages."""

    path: str
    """The segment of both the API's and the console's URLs (``datasets``)."""
    title: str
    one: str
    """One asset, in words (``dataset``)."""


DATASETS = AssetKind("datasets", "Datasets", "dataset")
TEMPLATES = AssetKind("templates", "Prompt templates", "prompt template")


async def _listing(request: Request, kind: AssetKind) -> Response:
    session = await current_session(request)
    owner = request.query_params.get("owner", "").strip()
    answer = await platform(request, session).get(f"/api/{kind.path}", owner=owner)
    return render(
        request,
        "assets.html",
        status_code=200 if answer.ok else answer.status,
        session=session,
        kind=kind,
        owner=owner,
        items=answer.body.get("items", []) if answer.ok else [],
        error=None if answer.ok else answer.error,
    )


async def _detail(request: Request, kind: AssetKind, owner: str, name: str) -> Response:
    session = await current_session(request)
    ref = f"{quote(owner, safe='')}/{quote(name, safe='')}"
    answer = await platform(request, session).get(f"/api/{kind.path}/{ref}")
    if not answer.ok:  # another tenant's private asset is the API's 404
        return refusal(request, session, answer)
    asset: dict[str, Any] = answer.body
    versions: list[dict[str, Any]] = asset.get("versions", [])
    wanted = request.query_params.get("version")
    chosen = next((v for v in versions if v["version"] == wanted), None) or (
        versions[-1] if versions else None
    )
    return render(
        request,
        "asset.html",
        session=session,
        kind=kind,
        asset=asset,
        ref=f"{owner}/{name}",
        url=f"/console/{kind.path}/{ref}",
        versions=versions,
        chosen=chosen,
        manifest=(chosen or {}).get("manifest") or {},
        mine=session.tenant is None or session.tenant == owner,
    )


@router.get("/datasets")
async def datasets(request: Request) -> Response:
    return await _listing(request, DATASETS)


@router.get("/datasets/{owner}/{name}")
async def dataset(owner: str, name: str, request: Request) -> Response:
    return await _detail(request, DATASETS, owner, name)


@router.get("/templates")
async def templates(request: Request) -> Response:
    return await _listing(request, TEMPLATES)


@router.get("/templates/{owner}/{name}")
async def template(owner: str, name: str, request: Request) -> Response:
    return await _detail(request, TEMPLATES, owner, name)
