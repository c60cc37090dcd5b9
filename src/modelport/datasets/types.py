"""Plain records of datasets: the manifest a version is, and what the store returns.

A dataset version's manifest names its task, license, columns (each a feature fed to a
model or the label scored against) and splits (each one Parquet file, by digest, with a
column per declared column). The manifest's canonical digest is the version's identity,
as a model version's is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from modelport.assets.manifests import manifest_digest, parse_manifest
from modelport.assets.records import AssetRecord, StrictManifest
from modelport.errors import InvalidInput
from modelport.manifest import FileEntry
from modelport.manifest.types import Datatype

Task = Literal["classification", "regression", "chat", "embedding"]
TASKS: tuple[str, ...] = ("classification", "regression", "chat", "embedding")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
_SPLIT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class DatasetColumn(StrictManifest):
    """A column of every split: a ``feature`` is fed to the model as the input of its
    name; the one ``label`` is what the model's answers are scored against."""

    name: str
    datatype: Datatype
    shape: list[int] = Field(default_factory=list, max_length=15)
    """One row's shape (``[]`` for a scalar, ``[4]`` for a vector of 4)."""
    role: Literal["feature", "label"]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("must be 1-128 characters of letters, digits, '_', '.', ':', '/', '-'")
        return v


class DatasetSplit(StrictManifest):
    """One split (``train``, ``test``...): a Parquet file of ``rows`` rows."""

    name: str
    file: FileEntry
    rows: int = Field(ge=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _SPLIT_RE.match(v):
            raise ValueError("must be 1-64 lowercase letters, digits, '.', '_' or '-'")
        return v


class DatasetManifest(StrictManifest):
    """What a dataset version is (see the module docstring)."""

    schema_version: Literal[1] = 1
    task: Task
    license: str = Field(description="SPDX license identifier or expression.")
    columns: list[DatasetColumn] = Field(min_length=2, max_length=256)
    splits: list[DatasetSplit] = Field(min_length=1, max_length=16)
    classes: list[str] | None = Field(
        default=None,
        max_length=10_000,
        description="classification: the labels' names; a label value is an index into it",
    )
    description: str = Field(default="", max_length=10_000)

    @model_validator(mode="after")
    def _shape(self) -> DatasetManifest:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError("column names must be unique")
        splits = [s.name for s in self.splits]
        if len(set(splits)) != len(splits):
            raise ValueError("split names must be unique")
        if sum(1 for c in self.columns if c.role == "label") != 1:
            raise ValueError("exactly one column must be the label")
        if self.classes is not None and self.task != "classification":
            raise ValueError("only a classification dataset names classes")
        return self

    @property
    def label(self) -> DatasetColumn:
        return next(c for c in self.columns if c.role == "label")

    @property
    def features(self) -> list[DatasetColumn]:
        return [c for c in self.columns if c.role == "feature"]

    def split(self, name: str) -> DatasetSplit:
        for split in self.splits:
            if split.name == name:
                return split
        raise InvalidInput(
            f"the dataset has no split {name!r}; there are {[s.name for s in self.splits]}",
            code="unknown_split",
            field="split",
        )


def parse_dataset_manifest(data: Any) -> DatasetManifest:
    """Validate raw JSON as a dataset manifest; 400 ``invalid_dataset_manifest`` naming
    the offending field."""
    return parse_manifest(DatasetManifest, data, what="dataset", code="invalid_dataset_manifest")


def dataset_digest(manifest: DatasetManifest) -> str:
    """The canonical digest: sorted keys, no whitespace, defaults filled in."""
    return manifest_digest(manifest)


Dataset = AssetRecord
"""A dataset as the store returns it (``assets.records``)."""


@dataclass(frozen=True)
class DatasetVersion:
    owner: str
    name: str
    version: str
    digest: str
    task: str
    license: str
    manifest: DatasetManifest
    created_at: datetime
    created_by: str

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}:{self.version}"
