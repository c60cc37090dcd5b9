"""Prompt template queries: the caller's session in, frozen records out
(``assets.queries``)."""

from __future__ import annotations

from modelport.assets.queries import AssetQueries
from modelport.assets.records import record_of
from modelport.store.tables import PromptTemplateRow, PromptTemplateVersionRow
from modelport.templates.types import TemplateVersion, parse_template_manifest


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
    asset_of=record_of,
    version_of=_version,
)
