"""Models: the catalog (``/api/models``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, model_path, split_model
from modelport.client.types import Model, Page, page_of


def list_call(
    *,
    q: str | None = None,
    task: str | None = None,
    owner: str | None = None,
    format: str | None = None,
    tag: str | None = None,
    license: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> Call[Page[Model]]:
    params: dict[str, str | int | None] = {
        "q": q,
        "task": task,
        "owner": owner,
        "format": format,
        "tag": tag,
    }
    params |= {"license": license, "limit": limit, "cursor": cursor}
    return Call("GET", "/api/models", page_of(Model.from_json), params=params)


def get_call(ref: str) -> Call[Model]:
    return Call("GET", model_path(ref), Model.from_json)


def create_call(
    ref: str,
    *,
    task: str = "",
    description: str = "",
    tags: Sequence[str] = (),
    license: str | None = None,
    visibility: str = "private",
) -> Call[Model]:
    owner, name = split_model(ref)
    body: dict[str, Any] = {"owner": owner, "name": name, "task": task, "description": description}
    body |= {"tags": list(tags), "license": license, "visibility": visibility}
    return Call("POST", "/api/models", Model.from_json, json=body)


class Models(Family):
    """``client.models``: list, get and create models (``owner/name``)."""

    def list(
        self,
        *,
        q: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        format: str | None = None,
        tag: str | None = None,
        license: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Model]:
        """Models matching every given filter; ``cursor``: a page's ``next_cursor``."""
        return self._t.run(
            list_call(
                q=q,
                task=task,
                owner=owner,
                format=format,
                tag=tag,
                license=license,
                limit=limit,
                cursor=cursor,
            )
        )

    def get(self, ref: str) -> Model:
        return self._t.run(get_call(ref))

    def create(
        self,
        ref: str,
        *,
        task: str = "",
        description: str = "",
        tags: Sequence[str] = (),
        license: str | None = None,
        visibility: str = "private",
    ) -> Model:
        return self._t.run(
            create_call(
                ref,
                task=task,
                description=description,
                tags=tags,
                license=license,
                visibility=visibility,
            )
        )


class AsyncModels(AsyncFamily):
    async def list(
        self,
        *,
        q: str | None = None,
        task: str | None = None,
        owner: str | None = None,
        format: str | None = None,
        tag: str | None = None,
        license: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Model]:
        return await self._t.run(
            list_call(
                q=q,
                task=task,
                owner=owner,
                format=format,
                tag=tag,
                license=license,
                limit=limit,
                cursor=cursor,
            )
        )

    async def get(self, ref: str) -> Model:
        return await self._t.run(get_call(ref))

    async def create(
        self,
        ref: str,
        *,
        task: str = "",
        description: str = "",
        tags: Sequence[str] = (),
        license: str | None = None,
        visibility: str = "private",
    ) -> Model:
        return await self._t.run(
            create_call(
                ref,
                task=task,
                description=description,
                tags=tags,
                license=license,
                visibility=visibility,
            )
        )
