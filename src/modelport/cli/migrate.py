"""``modelport migrate``: apply database migrations."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.pass_obj
def migrate(app: Application) -> None:
    """Bring the metadata database to the latest schema."""
    # Imported here so that every other command starts without loading Alembic.
    from modelport.config import Settings
    from modelport.store.migrate import current_revision, upgrade

    settings = Settings()
    url = settings.store.resolved_database_url
    if settings.store.is_embedded_database:
        settings.store.home.mkdir(parents=True, exist_ok=True)
    upgrade(url)
    revision = current_revision(url)
    if app.terminal.as_json:
        app.terminal.json({"revision": revision})
    else:
        app.terminal.success(f"database at revision {revision}")
