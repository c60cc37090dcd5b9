"""``modelport serve``: run the platform (embedded shape)."""

from __future__ import annotations

import click


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option("--dev", is_flag=True, help="Generate and print an admin key if none is set.")
@click.option("--log-level", default="info", show_default=True)
@click.option(
    "--access-log/--no-access-log",
    default=False,
    show_default=True,
    help="Log every request (costs CPU on the serving loop).",
)
@click.pass_obj
def serve(app: object, host: str, port: int, dev: bool, log_level: str, access_log: bool) -> None:
    """Start the platform: HTTP API on HOST:PORT (uvloop, httptools)."""
    import uvicorn

    from modelport.app import build_app
    from modelport.cli.application import Application
    from modelport.config import Settings
    from modelport.errors import ModelportError
    from modelport.tenancy.admin import check_admin_key, generate_admin_key

    assert isinstance(app, Application)
    settings = Settings()
    if dev and not settings.admin_key:
        settings = Settings(admin_key=generate_admin_key())
        app.terminal.warn(f"--dev: generated admin key: {settings.admin_key}")
    try:
        check_admin_key(settings.admin_key)
        asgi = build_app(settings)
    except ModelportError as exc:
        app.terminal.abort(exc.message)
    app.terminal.info(f"modelport serving on http://{host}:{port} (home: {settings.home})")
    uvicorn.run(
        asgi,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        loop="uvloop",
        http="httptools",
    )
