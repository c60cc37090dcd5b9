"""The catalog: filtered model listing with keyset (cursor) pagination.

Pages are ordered by the model's internal id and the cursor carries the last id
seen, so a page costs one index range scan however deep it is, and models added
while a client pages through never shift the pages it has not read yet.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, exists, or_, select
from sqlalchemy.orm import Session

from modelport.errors import InvalidInput
from modelport.registry.licenses import normalize_license
from modelport.registry.repository import model_record, tags_of
from modelport.registry.types import CatalogPage, CatalogQuery, CatalogViewer, Visibility
from modelport.store.cursors import IdCursor
from modelport.store.tables import ModelRow, ModelTagRow, ModelVersionRow

MAX_LIMIT = 200
_CURSOR = IdCursor(b"m1:")


def encode_cursor(model_id: int) -> str:
    """The cursor of the page after the model ``model_id`` (benchmarks jump deep with it)."""
    return _CURSOR.encode(model_id)


def search(session: Session, query: CatalogQuery) -> CatalogPage:
    """One page of models matching every given filter."""
    if not 1 <= query.limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {MAX_LIMIT}", code="invalid_limit", field="limit"
        )
    stmt = select(ModelRow).order_by(ModelRow.id).limit(query.limit + 1)
    if query.cursor:
        stmt = stmt.where(ModelRow.id > _CURSOR.decode(query.cursor))
    if query.q:
        stmt = stmt.where(
            or_(
                ModelRow.name.icontains(query.q, autoescape=True),
                ModelRow.description.icontains(query.q, autoescape=True),
            )
        )
    if query.task:
        stmt = stmt.where(ModelRow.task == query.task)
    if query.owner:
        stmt = stmt.where(ModelRow.owner == query.owner)
    if query.license:
        stmt = stmt.where(ModelRow.license == _license_key(query.license))
    if query.tag:
        stmt = stmt.where(
            exists().where(ModelTagRow.model_id == ModelRow.id, ModelTagRow.tag == query.tag)
        )
    if query.format:
        stmt = stmt.where(
            exists().where(
                ModelVersionRow.format == query.format, ModelVersionRow.model_id == ModelRow.id
            )
        )
    if query.viewer is not None:
        stmt = stmt.where(_visible_to(query.viewer))
    rows = list(session.scalars(stmt))
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    tags = tags_of(session, [r.id for r in rows])
    return CatalogPage(
        items=tuple(model_record(r, tags.get(r.id, ())) for r in rows),
        next_cursor=_CURSOR.encode(rows[-1].id) if more else None,
    )


def _visible_to(viewer: CatalogViewer) -> ColumnElement[bool]:
    """Public models, the viewer's tenant's, and those shared with it."""
    seen: list[ColumnElement[bool]] = [ModelRow.visibility == Visibility.PUBLIC.value]
    if viewer.tenant is not None:
        seen.append(ModelRow.owner == viewer.tenant)
    if viewer.namespaces:
        seen.append(ModelRow.owner.in_(sorted(viewer.namespaces)))
    seen.extend(
        and_(ModelRow.owner == owner, ModelRow.name == name)
        for owner, name in sorted(viewer.models)
    )
    return or_(*seen)


def _license_key(value: str) -> str:
    # Match how licenses are stored (normalized); an unparsable filter simply matches nothing.
    try:
        return normalize_license(value, field="license")
    except InvalidInput:
        return value
