"""Plain records every asset kind shares: the asset as the store returns it, and the
strict base of its manifests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict


class StrictManifest(BaseModel):
    """A manifest part: unknown fields refused, frozen once parsed."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class AssetRecord:
    """A dataset or a prompt template (its versions are the kind's own records)."""

    owner: str
    name: str
    visibility: str
    description: str
    created_at: datetime
    created_by: str

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}"


class Asset(Protocol):
    """What a kind's catalog reads of an asset (its access rule, its search)."""

    @property
    def owner(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def visibility(self) -> str: ...
    @property
    def description(self) -> str: ...


class AssetRow(Asset, Protocol):
    """The columns of an asset's table that ``record_of`` reads."""

    @property
    def created_at(self) -> datetime: ...
    @property
    def created_by(self) -> str: ...


def record_of(row: AssetRow) -> AssetRecord:
    """The frozen record of an asset's row."""
    return AssetRecord(
        row.owner, row.name, row.visibility, row.description, row.created_at, row.created_by
    )
