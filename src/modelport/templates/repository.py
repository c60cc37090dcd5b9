"""Prompt template queries: the caller's session in, frozen records out."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

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


def _row(session: Session, owner: str, name: str) -> PromptTemplateRow | None:
    return session.scalar(
        select(PromptTemplateRow).where(
            PromptTemplateRow.owner == owner, PromptTemplateRow.name == name
        )
    )


def find(session: Session, owner: str, name: str) -> Template | None:
    row = _row(session, owner, name)
    return None if row is None else _template(row)


def insert(
    session: Session, owner: str, name: str, *, visibility: str, description: str, actor: str
) -> Template:
    row = PromptTemplateRow(
        owner=owner, name=name, visibility=visibility, description=description, created_by=actor
    )
    session.add(row)
    session.flush()
    return _template(row)


def find_version(session: Session, owner: str, name: str, version: str) -> TemplateVersion | None:
    found = session.execute(
        select(PromptTemplateRow, PromptTemplateVersionRow)
        .join(
            PromptTemplateVersionRow, PromptTemplateVersionRow.template_id == PromptTemplateRow.id
        )
        .where(
            PromptTemplateRow.owner == owner,
            PromptTemplateRow.name == name,
            PromptTemplateVersionRow.version == version,
        )
    ).first()
    return None if found is None else _version(found[0], found[1])


def insert_version(
    session: Session,
    owner: str,
    name: str,
    version: str,
    *,
    digest: str,
    license: str,
    manifest: dict[str, object],
    actor: str,
) -> None:
    template = _row(session, owner, name)
    assert template is not None
    session.add(
        PromptTemplateVersionRow(
            template_id=template.id,
            version=version,
            digest=digest,
            license=license,
            manifest=manifest,
            created_by=actor,
        )
    )
    session.flush()


def versions(session: Session, owner: str, name: str) -> list[TemplateVersion]:
    rows = session.execute(
        select(PromptTemplateRow, PromptTemplateVersionRow)
        .join(
            PromptTemplateVersionRow, PromptTemplateVersionRow.template_id == PromptTemplateRow.id
        )
        .where(PromptTemplateRow.owner == owner, PromptTemplateRow.name == name)
        .order_by(PromptTemplateVersionRow.id)
    ).all()
    return [_version(d, v) for d, v in rows]


def listing(
    session: Session, owner: str | None = None
) -> list[tuple[Template, TemplateVersion | None]]:
    """Every template (of ``owner``) with its latest version, by owner and name."""
    query = select(PromptTemplateRow).order_by(PromptTemplateRow.owner, PromptTemplateRow.name)
    if owner is not None:
        query = query.where(PromptTemplateRow.owner == owner)
    rows = list(session.scalars(query))
    latest: dict[int, PromptTemplateVersionRow] = {}
    if rows:
        for version in session.scalars(
            select(PromptTemplateVersionRow)
            .where(PromptTemplateVersionRow.template_id.in_([r.id for r in rows]))
            .order_by(PromptTemplateVersionRow.id)
        ):
            latest[version.template_id] = version
    return [(_template(r), _version(r, latest[r.id]) if r.id in latest else None) for r in rows]
