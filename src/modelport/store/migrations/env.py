"""Alembic environment: runs against the URL set by ``modelport.store.migrate``.

Each migration runs in its own transaction, together with the move of
``alembic_version``: a migrator stopped at any point (killed, Ctrl-C, power lost)
leaves the database at the last migration it finished, never part-way into one.
PostgreSQL has transactional DDL; on SQLite, pysqlite's own transaction handling would
commit before every DDL statement, so it is switched off and each transaction begins
with an explicit ``BEGIN``.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Engine, create_engine, event, pool

from modelport.store import tables  # noqa: F401  (registers the tables)
from modelport.store.base import Base

config = context.config
target_metadata = Base.metadata


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # No implicit COMMIT before DDL: SQLAlchemy's BEGIN (below) delimits each migration.
    # Foreign keys stay unenforced (SQLite's default) while migrating: a batch table
    # rebuild drops and renames a table that others may reference, and the pragma
    # cannot be changed inside a transaction.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(conn: Any) -> None:
    # IMMEDIATE: take the write lock up front, as the application's connections do.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _engine(url: str) -> Engine:
    engine = create_engine(url, poolclass=pool.NullPool)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    assert url
    engine = _engine(url)
    try:
        with engine.connect() as connection:
            sqlite = connection.dialect.name == "sqlite"
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=sqlite,
                transactional_ddl=True,  # true of SQLite too, with the BEGIN above
                transaction_per_migration=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


run_migrations_online()
