"""Migration tests' one recipe: migrate a fresh database to a revision, insert the rows
a release of that time would have written, upgrade to a later revision, and look at
what the upgrade made of them (and of the schema)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from modelport.store import upgrade
from modelport.store.base import Base


@dataclass(frozen=True)
class Upgraded:
    """What ``upgrade_across`` found after the upgrade."""

    url: str
    """The upgraded database (a test may go on using it)."""
    diff: list[Any]
    """The differences left between the database and ``store.tables`` for the tables
    asked about (empty: the migration made them as declared)."""
    rows: list[tuple[Any, ...]]
    """The rows the query answered."""


def upgrade_across(
    tmp_path: Path,
    before: str,
    seed: Sequence[str],
    query: str,
    *,
    tables: Collection[str],
    after: str = "head",
) -> Upgraded:
    """Upgrade a fresh SQLite database to ``before``, run the ``seed`` statements (SQL
    of that revision's schema), upgrade to ``after``; then compare ``tables`` with the
    declared metadata and run ``query``."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url, before)
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in seed:
                connection.execute(text(statement))
        upgrade(url, after)
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
            rows = [tuple(row) for row in connection.execute(text(query))]
    finally:
        engine.dispose()
    return Upgraded(url, [d for d in diff if any(table in repr(d) for table in tables)], rows)
