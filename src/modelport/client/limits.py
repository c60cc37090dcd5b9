"""Rate and concurrency limits of a tenant, an API key or a model (``/api/limits``)."""

from __future__ import annotations

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, segment
from modelport.client.types import Limits, items_of

SCOPE_TYPES = ("tenant", "key", "model")


def _path(scope_type: str, scope_id: str) -> str:
    if scope_type not in SCOPE_TYPES:
        raise ValueError(f"scope type is one of {', '.join(SCOPE_TYPES)}, not {scope_type!r}")
    # A model's scope id is owner/name: the route takes the rest of the path.
    parts = "/".join(segment(part) for part in scope_id.split("/"))
    return f"/api/limits/{scope_type}/{parts}"


def list_call(*, tenant: str | None = None, scope_type: str | None = None) -> Call[list[Limits]]:
    params = {"tenant": tenant, "scope_type": scope_type}
    return Call("GET", "/api/limits", items_of(Limits.from_json), params=params)


def get_call(scope_type: str, scope_id: str) -> Call[Limits]:
    return Call("GET", _path(scope_type, scope_id), Limits.from_json)


def set_call(
    scope_type: str,
    scope_id: str,
    *,
    rpm: int | None = None,
    concurrency: int | None = None,
    tpm: int | None = None,
    jobs: int | None = None,
    job_concurrency: int | None = None,
) -> Call[Limits]:
    body = {
        "rpm": rpm,
        "concurrency": concurrency,
        "tpm": tpm,
        "jobs": jobs,
        "job_concurrency": job_concurrency,
    }
    return Call("PUT", _path(scope_type, scope_id), Limits.from_json, json=body)


def delete_call(scope_type: str, scope_id: str) -> Call[None]:
    return Call("DELETE", _path(scope_type, scope_id), lambda _: None)


class LimitsFamily(Family):
    """``client.limits``: a scope is (``tenant``, slug), (``key``, key id) or (``model``,
    ``owner/name``)."""

    def list(self, *, tenant: str | None = None, scope_type: str | None = None) -> list[Limits]:
        return self._t.run(list_call(tenant=tenant, scope_type=scope_type))

    def get(self, scope_type: str, scope_id: str) -> Limits:
        return self._t.run(get_call(scope_type, scope_id))

    def set(
        self,
        scope_type: str,
        scope_id: str,
        *,
        rpm: int | None = None,
        concurrency: int | None = None,
        tpm: int | None = None,
        jobs: int | None = None,
        job_concurrency: int | None = None,
    ) -> Limits:
        """Replace the scope's limits; a limit left None is not limited (``jobs``,
        ``job_concurrency``: a tenant scope's only)."""
        call = set_call(
            scope_type,
            scope_id,
            rpm=rpm,
            concurrency=concurrency,
            tpm=tpm,
            jobs=jobs,
            job_concurrency=job_concurrency,
        )
        return self._t.run(call)

    def delete(self, scope_type: str, scope_id: str) -> None:
        self._t.run(delete_call(scope_type, scope_id))


class AsyncLimitsFamily(AsyncFamily):
    async def list(
        self, *, tenant: str | None = None, scope_type: str | None = None
    ) -> list[Limits]:
        return await self._t.run(list_call(tenant=tenant, scope_type=scope_type))

    async def get(self, scope_type: str, scope_id: str) -> Limits:
        return await self._t.run(get_call(scope_type, scope_id))

    async def set(
        self,
        scope_type: str,
        scope_id: str,
        *,
        rpm: int | None = None,
        concurrency: int | None = None,
        tpm: int | None = None,
        jobs: int | None = None,
        job_concurrency: int | None = None,
    ) -> Limits:
        call = set_call(
            scope_type,
            scope_id,
            rpm=rpm,
            concurrency=concurrency,
            tpm=tpm,
            jobs=jobs,
            job_concurrency=job_concurrency,
        )
        return await self._t.run(call)

    async def delete(self, scope_type: str, scope_id: str) -> None:
        await self._t.run(delete_call(scope_type, scope_id))
