"""Plain records of prompt templates: the manifest a version is, and what the store
returns.

A version's manifest is a chat prompt: messages whose content may name variables as
``{{name}}``, and the variables it declares (each required, or with a default). Every
placeholder names a declared variable and every variable is used, so a typo fails at
publishing, not at a call. The manifest's canonical digest is the version's identity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from modelport.assets.manifests import manifest_digest, parse_manifest
from modelport.assets.records import AssetRecord, StrictManifest

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}")
"""``{{ name }}`` in a message's content; nothing else in the content is syntax."""
_VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class TemplateMessage(StrictManifest):
    role: Literal["system", "user", "assistant", "developer"]
    content: str = Field(min_length=1, max_length=100_000)


class TemplateVariable(StrictManifest):
    name: str
    description: str = Field(default="", max_length=1_000)
    default: str | None = Field(default=None, max_length=100_000)
    """A variable with a default may be left out of a call; one without is required."""
    max_length: int = Field(default=10_000, ge=1, le=1_000_000)
    """The longest value a call may give it, in characters."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _VARIABLE_RE.match(v):
            raise ValueError("must be a letter or '_', then up to 63 letters, digits or '_'")
        return v


class TemplateManifest(StrictManifest):
    """What a template version is (see the module docstring)."""

    schema_version: Literal[1] = 1
    license: str = Field(description="SPDX license identifier or expression.")
    description: str = Field(default="", max_length=10_000)
    messages: list[TemplateMessage] = Field(min_length=1, max_length=64)
    variables: list[TemplateVariable] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _placeholders(self) -> TemplateManifest:
        declared = [v.name for v in self.variables]
        if len(set(declared)) != len(declared):
            raise ValueError("variable names must be unique")
        used = {name for m in self.messages for name in PLACEHOLDER.findall(m.content)}
        undeclared = sorted(used - set(declared))
        if undeclared:
            raise ValueError(f"messages use undeclared variables: {', '.join(undeclared)}")
        unused = sorted(set(declared) - used)
        if unused:
            raise ValueError(f"variables no message uses: {', '.join(unused)}")
        return self


def parse_template_manifest(data: Any) -> TemplateManifest:
    """Validate raw JSON as a template manifest; 400 ``invalid_template_manifest``
    naming the offending field."""
    return parse_manifest(TemplateManifest, data, what="template", code="invalid_template_manifest")


def template_digest(manifest: TemplateManifest) -> str:
    """The canonical digest: sorted keys, no whitespace, defaults filled in."""
    return manifest_digest(manifest)


Template = AssetRecord
"""A template as the store returns it (``assets.records``)."""


@dataclass(frozen=True)
class TemplateVersion:
    owner: str
    name: str
    version: str
    digest: str
    license: str
    manifest: TemplateManifest
    created_at: datetime
    created_by: str

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}:{self.version}"
