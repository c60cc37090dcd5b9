"""Prompt template queries: the caller's session in, frozen records out
(``assets.queries``)."""

from __future__ import annotations

from modelport.assets.queries import AssetQueries
from modelport.store.tables import PromptTemplateRow, PromptTemplateVersionRow
from modelport.templates.types import Template, TemplateVersion, parse_template_manifest


def _template(row: PromptTemplateRow) -> Template:
    return Template(
        row.owner, row.name, row.visibility, row.description, row.created_at, row.created_by
    )


def _version(template: PromptTemplateRow, row: PromptTemplateVersionRow) -> TemplateVersion:
    return TemplateVersion(
        owner=template.owner,
        name=template.name,
        version=row.version,
        digest=row.digest,
        license=row.license,
        manifest=parse_template_manifest(row.manifest),
        created_at=row.created_at,
        created_by=row.created_by,
    )


QUERIES = AssetQueries(
    PromptTemplateRow,
    PromptTemplateVersionRow,
    link="template_id",
    asset_of=_template,
    version_of=_version,
)
