"""Assets: the datasets and prompt templates the caller may read, searched together."""

from __future__ import annotations

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call
from modelport.client.types import Asset, Page, page_of


def search_call(
    q: str | None = None,
    *,
    kind: str | None = None,
    task: str | None = None,
    license: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> Call[Page[Asset]]:
    params = {
        "q": q,
        "kind": kind,
        "task": task,
        "license": license,
        "cursor": cursor,
        "limit": limit,
    }
    return Call("GET", "/api/assets", page_of(Asset.from_json), params=params)


class Assets(Family):
    """``client.assets``."""

    def search(
        self,
        q: str | None = None,
        *,
        kind: str | None = None,
        task: str | None = None,
        license: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Asset]:
        """Datasets and templates matching ``q`` (a name first) and the filters
        (``kind``: ``dataset`` or ``template``); the page's ``raw`` has the ``total`` and
        the ``kind``, ``task`` and ``license`` facets."""
        return self._t.run(
            search_call(q, kind=kind, task=task, license=license, cursor=cursor, limit=limit)
        )


class AsyncAssets(AsyncFamily):
    async def search(
        self,
        q: str | None = None,
        *,
        kind: str | None = None,
        task: str | None = None,
        license: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Asset]:
        return await self._t.run(
            search_call(q, kind=kind, task=task, license=license, cursor=cursor, limit=limit)
        )
