"""Prompt templates: create one in a tenant's namespace, publish immutable versions,
read, list and render them as the caller may.

Access is the models' and datasets' rule (``tenancy.access``) on a template's own facts:
its tenant and the operator decide by roles; another tenant sees a public template, or a
private one a grant covers, and may read and render it. A template the caller may not
see is the 404 ``template_not_found`` of a missing one. Publishing needs
``model.register`` in the namespace. A template holds no blobs: its manifest is the
whole asset, and its digest the version's identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from modelport.assets.catalog import VISIBILITIES, AssetCatalog
from modelport.errors import InvalidInput
from modelport.store import Database
from modelport.templates import repository as repo
from modelport.templates.render import render
from modelport.templates.types import (
    Template,
    TemplateManifest,
    TemplateVersion,
    parse_template_manifest,
)
from modelport.tenancy.types import GrantSet, Principal


def split_ref(ref: str) -> tuple[str, str, str]:
    """``owner/name:version`` as its parts; 400 ``invalid_template_ref`` otherwise."""
    model, _, version = ref.partition(":")
    owner, _, name = model.partition("/")
    if not (owner and name and version):
        raise InvalidInput(
            f"a template is named owner/name:version, not {ref[:200]!r}",
            code="invalid_template_ref",
            field="template.ref",
        )
    return owner, name, version


class TemplateService(AssetCatalog[Template, TemplateVersion, TemplateManifest]):
    kind = "template"

    def __init__(self, database: Database, *, grants: Callable[[str], GrantSet]) -> None:
        super().__init__(database, repo.QUERIES, grants)

    def parse(self, manifest: object) -> TemplateManifest:
        return parse_template_manifest(manifest)

    def license_of(self, parsed: TemplateManifest) -> str:
        return parsed.license

    def card_of(self, version: TemplateVersion) -> str:
        return version.manifest.description

    def listing(
        self, principal: Principal, *, owner: str | None = None
    ) -> list[tuple[Template, TemplateVersion | None]]:
        """The templates the caller may see, each with its latest version."""
        return self.visible_listing(principal, owner)

    def render(
        self, principal: Principal, ref: str, values: Mapping[str, Any]
    ) -> tuple[TemplateVersion, list[dict[str, str]]]:
        """The version ``ref`` (``owner/name:version``) the caller may read, and its
        messages with ``values`` in (``render.render``'s refusals)."""
        owner, name, version = split_ref(ref)
        found = self.version(principal, owner, name, version)
        return found, render(found.manifest, values)


__all__ = ["VISIBILITIES", "TemplateService", "split_ref"]
