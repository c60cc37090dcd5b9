"""``modelport secrets rotate``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.pass_obj
def rotate(app: Application) -> None:
    """Re-seal every stored secret with the newest key of MODELPORT_SECRET_KEY (the
    first), plain values stored by an earlier release too. Every key that sealed a
    stored secret must still be listed (after the newest); remove the old ones once
    this has run.

    Runs on the database itself (MODELPORT_DATABASE_URL), not through a server.
    """
    from modelport.app import open_secrets
    from modelport.config import Settings
    from modelport.errors import ModelportError
    from modelport.store.sealed import rotate as rotate_all

    settings = Settings()
    try:
        database, box = open_secrets(settings)
    except ModelportError as exc:
        app.terminal.abort(exc.message)
    try:
        if not box.can_seal:
            app.terminal.abort(
                "no secret key: set MODELPORT_SECRET_KEY (newest first) to rotate to"
            )
        done = rotate_all(database, box)
    except ModelportError as exc:
        app.terminal.abort(exc.message)
    finally:
        database.dispose()
    columns = sorted(done.resealed)
    t = app.terminal
    if t.as_json:
        t.json(
            {
                c: {
                    "resealed": done.resealed[c],
                    "legacy": done.legacy[c],
                    "current": done.current[c],
                }
                for c in columns
            }
        )
        return
    t.table(
        ["column", "resealed", "plain sealed", "already current"],
        [[c, done.resealed[c], done.legacy[c], done.current[c]] for c in columns],
    )
    t.success("every stored secret is sealed with the newest key")
