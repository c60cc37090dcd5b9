"""Upgrading keeps today's versions readable: migration 0011 records the owner of every
model whose versions list a blob as holding it (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, text

from modelport.store import upgrade
from tests.cli.test_migrate import fresh_postgres_url  # noqa: F401 (a fixture)

BEFORE = "0010_usage_authorizations"
SHARED = "sha256:" + "a" * 64
ACME_ONLY = "sha256:" + "b" * 64
UNUSED = "sha256:" + "c" * 64


def seed_versions(url: str) -> None:
    """acme/m:1 lists SHARED and ACME_ONLY, globex/m:1 lists SHARED; UNUSED is a stored
    blob no version lists; one upload is in flight."""
    now = datetime.now(UTC)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for mid, owner in ((1, "acme"), (2, "globex")):
                conn.execute(
                    text(
                        "INSERT INTO models (id, owner, name, task, description, license,"
                        " visibility, created_at, created_by) VALUES"
                        " (:id, :owner, 'm', '', '', 'MIT', 'private', :now, 'seed')"
                    ),
                    {"id": mid, "owner": owner, "now": now},
                )
                conn.execute(
                    text(
                        "INSERT INTO model_versions (id, model_id, version, manifest_digest,"
                        " manifest, format, created_at, created_by) VALUES"
                        " (:id, :id, '1', :digest, '{}', 'onnx', :now, 'seed')"
                    ),
                    {"id": mid, "digest": "sha256:" + str(mid) * 64, "now": now},
                )
            files = [(1, "a.onnx", SHARED), (1, "b.bin", ACME_ONLY), (2, "a.onnx", SHARED)]
            for vid, path, digest in files:
                conn.execute(
                    text(
                        "INSERT INTO version_files (version_id, path, digest, size)"
                        " VALUES (:vid, :path, :digest, 3)"
                    ),
                    {"vid": vid, "path": path, "digest": digest},
                )
            for digest in (SHARED, ACME_ONLY, UNUSED):
                conn.execute(
                    text("INSERT INTO blobs (digest, size, created_at) VALUES (:d, 3, :now)"),
                    {"d": digest, "now": now},
                )
            conn.execute(
                text(
                    'INSERT INTO uploads (id, "offset", created_at, updated_at, expires_at)'
                    " VALUES ('u1', 0, :now, :now, :now)"
                ),
                {"now": now},
            )
    finally:
        engine.dispose()


def holders(url: str) -> set[tuple[str, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT digest, tenant FROM blob_owners"))
            upload = conn.execute(text("SELECT tenant FROM uploads WHERE id = 'u1'")).one()
        assert upload.tenant is None  # an upload begun before the upgrade holds nothing yet
        return {(digest, tenant) for digest, tenant in rows}
    finally:
        engine.dispose()


def check_backfill(url: str) -> None:
    upgrade(url, BEFORE)
    seed_versions(url)
    upgrade(url)
    assert holders(url) == {(SHARED, "acme"), (SHARED, "globex"), (ACME_ONLY, "acme")}


def test_the_upgrade_records_versions_owners_as_holders_on_sqlite(tmp_path: Path) -> None:
    check_backfill(f"sqlite:///{tmp_path / 'old.db'}")


def test_the_upgrade_records_versions_owners_as_holders_on_postgresql(
    fresh_postgres_url: str,  # noqa: F811
) -> None:
    check_backfill(fresh_postgres_url)


def test_the_migration_goes_back_down(tmp_path: Path) -> None:
    from alembic import command

    from modelport.store.migrate import alembic_config

    url = f"sqlite:///{tmp_path / 'db.db'}"
    upgrade(url)
    command.downgrade(alembic_config(url), BEFORE)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master"))}
            columns = {r[1] for r in conn.execute(text("PRAGMA table_info(uploads)"))}
    finally:
        engine.dispose()
    assert "blob_owners" not in tables and "tenant" not in columns
