"""Migration 0026_catalog_search_fts: it backfills the catalog's index from the models
already there with the very documents the registry writes, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from alembic import command
from sqlalchemy import inspect, text

from modelport.app import Services
from modelport.store import upgrade
from modelport.store.migrate import alembic_config
from tests.registry.helpers import Registry, manifest_for

BEFORE = "0026_catalog_search_fts-1"  # its parent, whichever revision that is


def _documents(services: Services) -> list[tuple[Any, ...]]:
    database = services.registry.database
    query = (
        "SELECT s.rowid, name, tags, task, description, card, formats FROM model_search AS s "
        "JOIN model_search_formats AS f ON f.model_id = s.rowid"
        if database.dialect == "sqlite"
        else "SELECT model_id, formats, CAST(document AS text) FROM model_search"
    )
    with database.transaction() as session:
        return sorted(tuple(row) for row in session.execute(text(query + " ORDER BY 1")))


def test_the_backfill_writes_what_the_registry_writes(
    registry: Registry, services: Services
) -> None:
    registry.create_model(
        "acme/fraud-risk", task="classification", tags=["payments", "cards"], visibility="public"
    )
    registry.create_model("acme/reviews", description="Sentiment of product reviews")
    registry.publish("acme/fraud-risk", "1", {**manifest_for(registry.data), "tags": ["v1"]})
    registry.publish(
        "acme/fraud-risk", "2", manifest_for(registry.data, description="Retrained on 2026")
    )
    written = _documents(services)
    assert len(written) == 2

    url = services.registry.database.url
    services.registry.database.dispose()
    command.downgrade(alembic_config(url), BEFORE)
    try:
        tables = inspect(services.registry.database.engine).get_table_names()
        assert "model_search" not in tables and "model_search_formats" not in tables
    finally:
        upgrade(url)
    assert _documents(services) == written
    found = registry.client.get("/api/models", params={"q": "retrained"}).json()
    assert [m["model"] for m in found["items"]] == ["acme/fraud-risk"]
