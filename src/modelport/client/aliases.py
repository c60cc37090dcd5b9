"""Aliases: names such as ``prod`` pointing at versions of a model."""

from __future__ import annotations

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, model_path, segment
from modelport.client.types import Alias, items_of


def _path(model: str, alias: str) -> str:
    return f"{model_path(model)}/aliases/{segment(alias)}"


def list_call(model: str) -> Call[list[Alias]]:
    return Call("GET", f"{model_path(model)}/aliases", items_of(Alias.from_json))


def set_call(model: str, alias: str, version: str) -> Call[Alias]:
    return Call("PUT", _path(model, alias), Alias.from_json, json={"version": version})


def delete_call(model: str, alias: str) -> Call[None]:
    return Call("DELETE", _path(model, alias), lambda _: None)


class Aliases(Family):
    """``client.aliases``: ``model`` is ``owner/name``."""

    def list(self, model: str) -> list[Alias]:
        return self._t.run(list_call(model))

    def set(self, model: str, alias: str, version: str) -> Alias:
        return self._t.run(set_call(model, alias, version))

    def delete(self, model: str, alias: str) -> None:
        self._t.run(delete_call(model, alias))


class AsyncAliases(AsyncFamily):
    async def list(self, model: str) -> list[Alias]:
        return await self._t.run(list_call(model))

    async def set(self, model: str, alias: str, version: str) -> Alias:
        return await self._t.run(set_call(model, alias, version))

    async def delete(self, model: str, alias: str) -> None:
        await self._t.run(delete_call(model, alias))
