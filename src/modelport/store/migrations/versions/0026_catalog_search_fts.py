"""catalog search fts: the catalog's full-text index (FTS5 on SQLite, tsvector + GIN on
PostgreSQL), backfilled from every existing model

Revision ID: 0026_catalog_search_fts
Revises: 0025_trace_context
Create Date: 2026-12-05 13:00:00

The tables are not declared in ``store.tables``: neither engine's index type exists in
the other. The documents written here are the ones ``registry.search_index`` writes
(the logic is copied, so that this revision keeps meaning what it meant).
"""

from __future__ import annotations

import json
import re
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0026_catalog_search_fts"
down_revision = "0025_trace_context"
branch_labels = None
depends_on = None

_WORD = re.compile(r"[^\W_]+")
_BATCH = 1000
_MAX_CARD = 20_000

_PG_DOCUMENT = (
    "setweight(to_tsvector('simple', :name), 'A') || "
    "setweight(to_tsvector('simple', :tags || ' ' || :task), 'B') || "
    "setweight(to_tsvector('simple', :description), 'C') || "
    "setweight(to_tsvector('simple', :card), 'D')"
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(
            "CREATE TABLE model_search ("
            "model_id integer PRIMARY KEY REFERENCES models (id) ON DELETE CASCADE, "
            "formats text NOT NULL, document tsvector NOT NULL)"
        )
        op.execute("CREATE INDEX ix_model_search_document ON model_search USING gin (document)")
        inserts = [
            sa.text(
                "INSERT INTO model_search (model_id, formats, document) "
                f"VALUES (:id, :formats, {_PG_DOCUMENT})"
            )
        ]
    else:
        op.execute(
            "CREATE VIRTUAL TABLE model_search USING fts5("
            "name, tags, task, description, card, "
            "tokenize = 'unicode61 remove_diacritics 2')"
        )
        op.execute(
            "CREATE TABLE model_search_formats ("
            "model_id INTEGER NOT NULL PRIMARY KEY REFERENCES models (id) ON DELETE CASCADE, "
            "formats TEXT NOT NULL)"
        )
        inserts = [
            sa.text(
                "INSERT INTO model_search (rowid, name, tags, task, description, card) "
                "VALUES (:id, :name, :tags, :task, :description, :card)"
            ),
            sa.text("INSERT INTO model_search_formats (model_id, formats) VALUES (:id, :formats)"),
        ]
    last = 0
    while True:
        models = bind.execute(
            sa.text(
                "SELECT id, name, task, description FROM models WHERE id > :last "
                "ORDER BY id LIMIT :batch"
            ),
            {"last": last, "batch": _BATCH},
        ).all()
        if not models:
            break
        last = models[-1][0]
        ids = [m[0] for m in models]
        tags: dict[int, list[str]] = {}
        for mid, tag in bind.execute(
            sa.text("SELECT model_id, tag FROM model_tags WHERE model_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": ids},
        ):
            tags.setdefault(mid, []).append(tag)
        manifests: dict[int, list[str]] = {}
        formats: dict[int, set[str]] = {}
        for mid, text, fmt in bind.execute(
            sa.text(
                "SELECT model_id, manifest, format FROM model_versions "
                "WHERE model_id IN :ids ORDER BY id"
            ).bindparams(sa.bindparam("ids", expanding=True)),
            {"ids": ids},
        ):
            manifests.setdefault(mid, []).append(text)
            formats.setdefault(mid, set()).add(fmt)
        plain = bind.dialect.name == "postgresql"
        documents = [
            {
                **_texts(
                    {
                        "name": name,
                        "tags": " ".join(sorted(tags.get(mid, []))),
                        "task": task or "",
                        "description": description or "",
                        "card": _card(manifests.get(mid, [])),
                    },
                    plain=plain,
                ),
                "id": mid,
                "formats": " ".join(sorted(formats.get(mid, ()))),
            }
            for mid, name, task, description in models
        ]
        for insert in inserts:
            bind.execute(insert, documents)


def _texts(texts: dict[str, str], *, plain: bool) -> dict[str, str]:
    # PostgreSQL's parser reads "model-010000" as "model" and the number "-010000": it is
    # given the words alone, as queries spell them (lower-case letter and digit runs).
    if not plain:
        return texts
    return {
        key: " ".join(w[:64] for w in _WORD.findall(value.lower())) for key, value in texts.items()
    }


def _card(manifests: list[str]) -> str:
    seen: dict[str, None] = {}
    for raw in manifests:
        data: dict[str, Any] = json.loads(raw)
        for part in (data.get("description") or "", " ".join(data.get("tags") or ())):
            if part:
                seen.setdefault(part, None)
    return "\n".join(seen)[:_MAX_CARD]


def downgrade() -> None:
    op.execute("DROP TABLE model_search")
    if op.get_bind().dialect.name != "postgresql":
        op.execute("DROP TABLE model_search_formats")
