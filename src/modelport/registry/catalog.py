"""The catalog: filtered model listing, and ranked full-text search with facets.

Without a query, pages are ordered by the model's internal id and the cursor carries the
last id seen, so a page costs one index range scan however deep it is, and models added
while a client pages through never shift the pages it has not read yet.

With a query (``q``), the search index (``registry.search_index``) ranks the matches: a
model whose name is exactly the query's words first, then by the index's score, then by
id, so the order is total and a page's cursor (an offset into it) always continues where
the page ended while the catalog does not change. Every query answer carries the facets
and the count of matches; one that finds nothing also carries suggestions.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Select, and_, exists, func, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from modelport.errors import InvalidInput
from modelport.registry.facets import FACETS, PriceBands, count_facets
from modelport.registry.licenses import normalize_license
from modelport.registry.repository import model_record, tags_of
from modelport.registry.scores import ScoreBuckets, meets
from modelport.registry.search_index import SearchIndex
from modelport.registry.search_terms import SearchTerms, parse_terms
from modelport.registry.suggest import suggestions
from modelport.registry.types import (
    CatalogPage,
    CatalogQuery,
    CatalogViewer,
    FacetCount,
    Visibility,
)
from modelport.store.base import utcnow
from modelport.store.cursors import IdCursor
from modelport.store.tables import ModelRow, ModelTagRow, ModelVersionRow

MAX_LIMIT = 200
_CURSOR = IdCursor(b"m1:")
_RANKED = IdCursor(b"r1:")


def encode_cursor(model_id: int) -> str:
    """The cursor of the page after the model ``model_id`` (benchmarks jump deep with it)."""
    return _CURSOR.encode(model_id)


def search(session: Session, query: CatalogQuery, index: SearchIndex) -> CatalogPage:
    """One page of models matching every given filter (ranked when ``q`` is given)."""
    if not 1 <= query.limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {MAX_LIMIT}", code="invalid_limit", field="limit"
        )
    terms = parse_terms(query.q)
    if query.q and terms is None:  # only punctuation: nothing can match
        return CatalogPage(items=(), next_cursor=None, facets=_no_facets(), total=0)
    filters = _filters(query, PriceBands.of(session, utcnow()), ScoreBuckets.of(session))
    index.begin(session)
    if terms is None:
        return _listed(session, query, filters, index)
    return _ranked(session, query, filters, terms, index)


def _listed(
    session: Session,
    query: CatalogQuery,
    filters: dict[str, ColumnElement[bool]],
    index: SearchIndex,
) -> CatalogPage:
    stmt = select(ModelRow).where(*filters.values()).order_by(ModelRow.id).limit(query.limit + 1)
    if query.cursor:
        stmt = stmt.where(ModelRow.id > _CURSOR.decode(query.cursor))
    rows = list(session.scalars(stmt))
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    page = _page(session, rows, _CURSOR.encode(rows[-1].id) if more else None)
    if not query.facets:
        return page
    formats = index.formats()
    matching = _unfaceted(filters).outerjoin(formats, formats.c.model_id == ModelRow.id)
    return _with_facets(session, page, matching, formats.c.formats, query)


def _ranked(
    session: Session,
    query: CatalogQuery,
    filters: dict[str, ColumnElement[bool]],
    terms: SearchTerms,
    index: SearchIndex,
) -> CatalogPage:
    hits = index.hits(terms)
    offset = _RANKED.decode(query.cursor) if query.cursor else 0
    exact = _name_words(ModelRow.name) == terms.key
    stmt = (
        select(ModelRow)
        .join(hits, hits.c.model_id == ModelRow.id)
        .where(*filters.values())
        .order_by(exact.desc(), hits.c.score.desc(), ModelRow.id)
        .offset(offset)
        .limit(query.limit + 1)
    )
    rows = list(session.scalars(stmt))
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    page = _page(session, rows, _RANKED.encode(offset + query.limit) if more else None)

    matching = _unfaceted(filters).join(hits, hits.c.model_id == ModelRow.id)
    page = _with_facets(session, page, matching, hits.c.formats, query)
    if page.total == 0:
        visible = filters.get("visible")
        page = CatalogPage(
            items=(),
            next_cursor=None,
            facets=page.facets,
            total=0,
            suggestions=suggestions(session, index, terms, visible),
        )
    return page


def _page(session: Session, rows: list[ModelRow], cursor: str | None) -> CatalogPage:
    tags = tags_of(session, [r.id for r in rows])
    return CatalogPage(
        items=tuple(model_record(r, tags.get(r.id, ())) for r in rows), next_cursor=cursor
    )


def _with_facets(
    session: Session,
    page: CatalogPage,
    matching: Select[int],
    formats: ColumnElement[str],
    query: CatalogQuery,
) -> CatalogPage:
    wanted = {
        name: value
        for name, value in (
            ("task", query.task),
            ("format", query.format),
            ("license", _license_key(query.license) if query.license else None),
            ("price", query.price),
            ("score", query.score),
        )
        if value
    }
    facets, total = count_facets(session, matching, formats, wanted, utcnow())
    return CatalogPage(items=page.items, next_cursor=page.next_cursor, facets=facets, total=total)


def _name_words(name: InstrumentedAttribute[str]) -> ColumnElement[str]:
    """A model name as the words a query spells it with (names are lower-case letters,
    digits and ``.``, ``_``, ``-``): ``fraud-risk`` is ``fraud risk``, the query's
    ``SearchTerms.key``. Computed on the row already read, so finding the exact name
    costs no lookup per match."""
    return func.replace(func.replace(func.replace(name, "-", " "), "_", " "), ".", " ")


def _unfaceted(filters: dict[str, ColumnElement[bool]]) -> Select[int]:
    """The ids of the models matching every filter that is no facet (facets filter their
    counts themselves)."""
    return select(ModelRow.id).where(*(c for name, c in filters.items() if name not in FACETS))


def _filters(
    query: CatalogQuery, bands: PriceBands, scores: ScoreBuckets
) -> dict[str, ColumnElement[bool]]:
    """Each given filter's condition on ``ModelRow``, by name (facets leave their own
    out); ``visible`` is never left out."""
    found: dict[str, ColumnElement[bool]] = {}
    if query.task:
        found["task"] = ModelRow.task == query.task
    if query.owner:
        found["owner"] = ModelRow.owner == query.owner
    if query.license:
        found["license"] = ModelRow.license == _license_key(query.license)
    if query.tag:
        found["tag"] = exists().where(
            ModelTagRow.model_id == ModelRow.id, ModelTagRow.tag == query.tag
        )
    if query.format:
        found["format"] = exists().where(
            ModelVersionRow.format == query.format, ModelVersionRow.model_id == ModelRow.id
        )
    if query.price:
        found["price"] = bands.only(query.price)
    if query.score:
        found["score"] = scores.only(query.score)
    if query.min_score is not None:
        found["min_score"] = meets(query.min_score)
    if query.viewer is not None:
        found["visible"] = _visible_to(query.viewer)
    return found


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


def _no_facets() -> dict[str, tuple[FacetCount, ...]]:
    return {name: () for name in FACETS}
