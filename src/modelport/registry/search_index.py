"""The catalog's full-text index, one interface over two engines.

Each model has one document: its name, tags and task, its description, and its card
(what its versions' manifests describe and tag). SQLite keeps the documents in an FTS5
table ranked by ``bm25``; PostgreSQL in a ``tsvector`` column under a GIN index ranked
by ``ts_rank_cd``. Both weigh a name far above tags and task, those above the
description, and that above the card. Both tables are made by migration
``0026_catalog_search_fts``, not declared in ``store.tables``: neither engine's column
types exist in the other.

Call order: the registry's writes call ``put`` (or ``remove``) inside the transaction
that changed the model, so the index never disagrees with a committed model. A search
calls ``begin`` first in its transaction, then builds its statements from ``hits``,
``formats`` and ``name_prefix``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import orjson
from sqlalchemy import Float, Integer, String, Subquery, TextClause, select, text
from sqlalchemy.orm import Session

from modelport.registry.search_terms import SearchTerms, fts5_match, tsquery, words_of
from modelport.store.tables import ModelRow, ModelTagRow, ModelVersionRow

MAX_CARD = 20_000
"""Characters of card text kept per model: a model with many versions describes itself
many times over; the first mentions are enough to be found."""


@dataclass(frozen=True)
class SearchDocument:
    """What the index holds of one model."""

    name: str
    tags: str
    task: str
    description: str
    card: str
    formats: str
    """The formats of its versions, space-separated (not searched: the format facet
    reads them here, where a lookup of the versions per match would cost more)."""


class SearchIndex(Protocol):
    """A full-text index of the catalog's models (see the module docstring)."""

    def put(self, session: Session, model_id: int, document: SearchDocument) -> None:
        """Index (or re-index) a model, in the caller's transaction."""
        ...

    def remove(self, session: Session, model_id: int) -> None:
        """Forget a model, in the caller's transaction."""
        ...

    def begin(self, session: Session) -> None:
        """Set the caller's transaction up for the search queries that follow."""
        ...

    def hits(self, terms: SearchTerms) -> Subquery:
        """Models matching every term: columns ``model_id``, ``score`` (higher is
        better) and ``formats`` (read only by a query that selects it)."""
        ...

    def formats(self) -> Subquery:
        """Every indexed model's formats: columns ``model_id`` and ``formats``."""
        ...

    def name_prefix(self, prefix: str) -> Subquery:
        """Models with a name word starting with ``prefix`` (letters and digits only):
        column ``model_id``."""
        ...


def document_of(session: Session, model_id: int) -> SearchDocument:
    """A model's document, read from its rows in the caller's transaction."""
    name, task, description = session.execute(
        select(ModelRow.name, ModelRow.task, ModelRow.description).where(ModelRow.id == model_id)
    ).one()
    tags = session.scalars(
        select(ModelTagRow.tag).where(ModelTagRow.model_id == model_id).order_by(ModelTagRow.tag)
    )
    versions = session.execute(
        select(ModelVersionRow.manifest, ModelVersionRow.format)
        .where(ModelVersionRow.model_id == model_id)
        .order_by(ModelVersionRow.id)
    ).all()
    return SearchDocument(
        name=name,
        tags=" ".join(tags),
        task=task,
        description=description,
        card=card_text(manifest for manifest, _ in versions),
        formats=" ".join(sorted({fmt for _, fmt in versions})),
    )


def card_text(manifests: Iterable[str]) -> str:
    """The distinct descriptions and tags of a model's version manifests (JSON texts)."""
    seen: dict[str, None] = {}
    for raw in manifests:
        data = orjson.loads(raw)
        for part in (data.get("description") or "", " ".join(data.get("tags") or ())):
            if part:
                seen.setdefault(part, None)
    return "\n".join(seen)[:MAX_CARD]


class SqliteSearchIndex:
    """FTS5 table ``model_search`` whose rowid is the model's id, and beside it the plain
    table ``model_search_formats`` (reading one column of an FTS5 row reads the whole
    document: a B-tree row of its own costs a third of that per match)."""

    # bm25 weights, one per column in table order: name, tags, task, description, card.
    WEIGHTS = "10.0, 4.0, 4.0, 1.0, 0.5"

    def begin(self, session: Session) -> None:
        pass

    def put(self, session: Session, model_id: int, document: SearchDocument) -> None:
        self.remove(session, model_id)
        session.execute(
            text(
                "INSERT INTO model_search (rowid, name, tags, task, description, card) "
                "VALUES (:id, :name, :tags, :task, :description, :card)"
            ),
            {"id": model_id, **_fields(document)},
        )
        session.execute(
            text("INSERT INTO model_search_formats (model_id, formats) VALUES (:id, :formats)"),
            {"id": model_id, "formats": document.formats},
        )

    def remove(self, session: Session, model_id: int) -> None:
        session.execute(text("DELETE FROM model_search WHERE rowid = :id"), {"id": model_id})
        session.execute(
            text("DELETE FROM model_search_formats WHERE model_id = :id"), {"id": model_id}
        )

    def hits(self, terms: SearchTerms) -> Subquery:
        return _typed(
            text(
                "SELECT model_search.rowid AS model_id, "
                f"-bm25(model_search, {self.WEIGHTS}) AS score, f.formats AS formats "
                "FROM model_search LEFT JOIN model_search_formats AS f "
                "ON f.model_id = model_search.rowid "
                "WHERE model_search MATCH :match"
            ).bindparams(match=fts5_match(terms)),
            "hits",
        )

    def formats(self) -> Subquery:
        return _formats(text("SELECT model_id, formats FROM model_search_formats"))

    def name_prefix(self, prefix: str) -> Subquery:
        return (
            text("SELECT rowid AS model_id FROM model_search WHERE model_search MATCH :match")
            .bindparams(match=fts5_match(SearchTerms((prefix,)), column="name"))
            .columns(model_id=Integer)
            .subquery("named")
        )


class PostgresSearchIndex:
    """Table ``model_search``: a weighted ``tsvector`` per model, under a GIN index."""

    # ts_rank_cd's weights of the labels D, C, B, A: card, description, tags and task, name.
    WEIGHTS = "{0.05, 0.2, 0.4, 1.0}"
    DOCUMENT = (
        "setweight(to_tsvector('simple', :name), 'A') || "
        "setweight(to_tsvector('simple', :tags || ' ' || :task), 'B') || "
        "setweight(to_tsvector('simple', :description), 'C') || "
        "setweight(to_tsvector('simple', :card), 'D')"
    )

    def begin(self, session: Session) -> None:
        # psycopg prepares a statement run five times, and PostgreSQL then settles on a
        # generic plan, blind to the query's words and filters: one that loops over the
        # price book per match took seconds where the custom plan takes milliseconds.
        session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))

    def put(self, session: Session, model_id: int, document: SearchDocument) -> None:
        session.execute(
            text(
                "INSERT INTO model_search (model_id, formats, document) "
                f"VALUES (:id, :formats, {self.DOCUMENT}) "
                "ON CONFLICT (model_id) DO UPDATE SET "
                "formats = excluded.formats, document = excluded.document"
            ),
            {"id": model_id, **_fields(document, plain=True)},
        )

    def remove(self, session: Session, model_id: int) -> None:
        session.execute(text("DELETE FROM model_search WHERE model_id = :id"), {"id": model_id})

    def hits(self, terms: SearchTerms) -> Subquery:
        # ts_rank_cd sums every mention, so a description saying a word four times would
        # outscore a name saying it once: the field that holds every word sets the tier
        # (name 2, tags or task 1, else 0) and the bounded rank (normalization 32:
        # rank / (rank + 1)) orders within it.
        return _typed(
            text(
                "SELECT s.model_id AS model_id, "
                "CASE WHEN s.document @@ to_tsquery('simple', :named) THEN 2 "
                "WHEN s.document @@ to_tsquery('simple', :tagged) THEN 1 ELSE 0 END "
                "+ ts_rank_cd(CAST(:weights AS float4[]), s.document, q.q, 32) AS score, "
                "s.formats AS formats "
                "FROM model_search AS s, to_tsquery('simple', :match) AS q(q) "
                "WHERE s.document @@ q.q"
            ).bindparams(
                weights=self.WEIGHTS,
                match=tsquery(terms),
                named=tsquery(terms, weights="A"),
                tagged=tsquery(terms, weights="AB"),
            ),
            "hits",
        )

    def formats(self) -> Subquery:
        return _formats(text("SELECT model_id, formats FROM model_search"))

    def name_prefix(self, prefix: str) -> Subquery:
        return (
            text("SELECT model_id FROM model_search WHERE document @@ to_tsquery('simple', :match)")
            .bindparams(match=tsquery(SearchTerms((prefix,)), weights="A"))
            .columns(model_id=Integer)
            .subquery("named")
        )


def search_index_for(dialect: str) -> SearchIndex:
    """The index of a database's engine (``Database.dialect``)."""
    if dialect == "sqlite":
        return SqliteSearchIndex()
    if dialect == "postgresql":
        return PostgresSearchIndex()
    raise ValueError(f"no catalog search index for the {dialect!r} database")


def _fields(document: SearchDocument, *, plain: bool = False) -> dict[str, str]:
    """The statement's parameters; ``plain``: each text as its words only, for
    PostgreSQL, whose parser reads ``model-010000`` as ``model`` and the number
    ``-010000``, where a query (``search_terms``) has the words ``model`` and ``010000``."""
    texts = {
        "name": document.name,
        "tags": document.tags,
        "task": document.task,
        "description": document.description,
        "card": document.card,
    }
    if plain:
        texts = {key: " ".join(words_of(value)) for key, value in texts.items()}
    return {**texts, "formats": document.formats}


def _typed(clause: TextClause, name: str) -> Subquery:
    return clause.columns(model_id=Integer, score=Float, formats=String).subquery(name)


def _formats(clause: TextClause) -> Subquery:
    return clause.columns(model_id=Integer, formats=String).subquery("formats")
