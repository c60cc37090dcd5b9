"""``modelport serve``: run the platform (embedded shape, or several worker processes)."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from modelport.cli.application import Application
    from modelport.config import Settings


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes serving the port (default MODELPORT_WORKERS, else 1). "
    "Above one, MODELPORT_REDIS_URL is required.",
)
@click.option(
    "--role",
    type=click.Choice(["all", "gateway", "worker"]),
    default=None,
    help="What this process does (default MODELPORT_ROLE, else all): gateway serves the "
    "HTTP surfaces with no model host, worker only its model host's /v2 for the "
    "operator's key.",
)
@click.option("--dev", is_flag=True, help="Generate and print an admin key if none is set.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default=None,
    help="The least severe log records written (default MODELPORT_LOG_LEVEL, else info); "
    "MODELPORT_LOG_FORMAT=json writes them as JSON lines.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate (chain) to serve HTTPS with (default MODELPORT_TLS_CERT_PATH); "
    "needs --tls-key.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key of --tls-cert (default MODELPORT_TLS_KEY_PATH).",
)
@click.option(
    "--grpc-port",
    type=click.IntRange(min=1, max=65535),
    default=None,
    help="Also serve the Open Inference Protocol over gRPC on this port (default "
    "MODELPORT_GRPC_PORT, else no gRPC), on --host unless MODELPORT_GRPC_HOST says "
    "otherwise; with TLS when --tls-cert is given.",
)
@click.option(
    "--access-log/--no-access-log",
    default=False,
    show_default=True,
    help="Log every request (costs CPU on the serving loop).",
)
@click.pass_obj
def serve(
    app: object,
    host: str,
    port: int,
    workers: int | None,
    role: str | None,
    dev: bool,
    log_level: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    grpc_port: int | None,
    access_log: bool,
) -> None:
    """Start the platform: HTTP API on HOST:PORT (uvloop, httptools); HTTPS with
    --tls-cert and --tls-key."""

    from modelport.app import build_app, configure_logging
    from modelport.cli.application import Application
    from modelport.config import Role, Settings
    from modelport.errors import ModelportError
    from modelport.tenancy.admin import check_admin_key, generate_admin_key

    assert isinstance(app, Application)
    settings = Settings()
    if dev and not settings.security.admin_key:
        settings = settings.model_copy(update={"admin_key": generate_admin_key()})
        app.terminal.warn(f"--dev: generated admin key: {settings.security.admin_key}")
    if workers is not None:
        settings = settings.model_copy(update={"workers": workers})
    if role is not None:
        settings = settings.model_copy(update={"role": Role(role)})
    if log_level is not None:
        settings = settings.model_copy(update={"log_level": log_level.upper()})
    if tls_cert is not None:
        settings = settings.model_copy(update={"tls_cert_path": tls_cert})
    if tls_key is not None:
        settings = settings.model_copy(update={"tls_key_path": tls_key})
    if grpc_port is not None:
        settings = settings.model_copy(update={"grpc_port": grpc_port})
    if settings.grpc.host is None:
        settings = settings.model_copy(update={"grpc_host": host})
    configure_logging(settings)
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": settings.logs.level.lower(),
        # uvicorn's records go through the platform's handler (``logs.configure``).
        "log_config": None,
        "access_log": access_log,
        "loop": "uvloop",
        "http": "httptools",
    }
    try:
        check_admin_key(settings.security.admin_key)
        options.update(tls_options(settings))
        warn_without_sandbox(app, settings)
        if settings.workers > 1:
            _serve_workers(app, settings, options)
            return
        # Bound before the application is built: a taken port is one line, at once.
        sock = bound_socket(host, port)
        asgi = build_app(settings)
    except ModelportError as exc:
        app.terminal.abort(exc.message)
    scheme = "https" if "ssl_certfile" in options else "http"
    announcement = (
        f"modelport serving on {scheme}://{host}:{port}{grpc_announcement(settings)} "
        f"(home: {settings.store.home})"
    )
    _serve_announced(asgi, options, sock, lambda: app.terminal.info(announcement))


def _serve_announced(
    asgi: Any, options: dict[str, Any], sock: socket.socket, announce: Callable[[], None]
) -> None:
    """uvicorn on ``sock``; ``announce`` once it listens (its start-up done)."""
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit:
                announce()

    AnnouncingServer(uvicorn.Config(asgi, **options)).run(sockets=[sock])


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (uvicorn listens on it); ``InvalidInput``
    ``port_unavailable`` naming the port when it cannot be had."""
    from modelport.errors import InvalidInput

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InvalidInput(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}", code="port_unavailable"
        ) from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        reason = (
            f"port {port} is already in use (stop what holds it, or choose another with --port)"
            if exc.errno == errno.EADDRINUSE
            else f"port {port}: {exc.strerror or exc}"
        )
        raise InvalidInput(
            f"cannot serve on {host}:{port}: {reason}", code="port_unavailable"
        ) from None
    sock.set_inheritable(True)
    return sock


def grpc_announcement(settings: Settings) -> str:
    """Where the gRPC surface listens, for the start-up line ('' when it is off; a
    worker serves one only as a member of the pool, for its gateways)."""
    from modelport.config import Role

    if settings.grpc.port is None or (settings.role is Role.WORKER and not settings.worker_pool_on):
        return ""
    scheme = "grpcs" if settings.security.tls_cert_path is not None else "grpc"
    return f" and {scheme}://{settings.grpc.host}:{settings.grpc.port}"


def warn_without_sandbox(app: Application, settings: Settings) -> None:
    """Say once, at start-up, that validations will fail where the sandbox cannot run,
    and how to fix it (the validations still refuse: the sandbox fails closed)."""
    from modelport.sandbox import isolation_available

    if settings.sandbox.mode == "unisolated" or isolation_available(settings.sandbox.bwrap):
        return
    app.terminal.warn(
        f"warning: the sandbox cannot run here (bubblewrap '{settings.sandbox.bwrap}' is "
        "missing or cannot create namespaces), so every model validation will fail with "
        "sandbox_unavailable. Install bubblewrap (Debian: apt install bubblewrap), or set "
        "MODELPORT_SANDBOX=unisolated on a machine that runs only its owner's models."
    )


def tls_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's TLS options from the settings (none: plain HTTP). Both paths or
    neither, each a readable file holding what it should (``invalid_tls``)."""
    import ssl

    from modelport.errors import InvalidInput

    cert, key = settings.security.tls_cert_path, settings.security.tls_key_path
    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        raise InvalidInput(
            "TLS needs both a certificate and its key (--tls-cert and --tls-key, or "
            "MODELPORT_TLS_CERT_PATH and MODELPORT_TLS_KEY_PATH)",
            code="invalid_tls",
        )
    try:  # here, with a clear message, rather than in every worker
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidInput(
            f"cannot serve TLS with certificate {cert} and key {key}: {exc}",
            code="invalid_tls",
        ) from None
    return {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}


def _serve_workers(app: Application, settings: Settings, options: dict[str, Any]) -> None:
    """Run ``settings.workers`` uvicorn worker processes on one port (``cli.workers``).

    Each worker builds its own application from the environment (``app.serve_app``),
    so what the command decided is handed over there: the admin key (``--dev``), the
    worker count (which splits the memory budgets), the role and the folder where the workers'
    Prometheus metrics meet, so a scrape of any worker answers for all of them."""
    import uvicorn

    from modelport.app import build_services, build_worker_services
    from modelport.cli.workers import APP, Supervisor, reuse_port_supported
    from modelport.config import Role
    from modelport.errors import InvalidInput

    if not settings.store.redis_url:
        raise InvalidInput(
            f"--workers {settings.workers} needs MODELPORT_REDIS_URL: rate and concurrency "
            "limits, key revocations and model loads are shared between the worker "
            "processes through Redis",
            code="redis_required",
        )
    # Build the services once here (migrating, when that is on): a setting that cannot
    # work stops the command with its message, instead of failing in every worker,
    # which uvicorn would start again and again.
    if settings.role is Role.WORKER:
        build_worker_services(settings).close()
    else:
        build_services(settings).close()
    run_dir = settings.store.home / "run"
    run_dir.mkdir(exist_ok=True)
    metrics_dir = Path(tempfile.mkdtemp(prefix="metrics-", dir=run_dir))
    os.environ.update(
        {
            "MODELPORT_WORKERS": str(settings.workers),
            "MODELPORT_ROLE": settings.role.value,
            "MODELPORT_ADMIN_KEY": settings.security.admin_key,
            "MODELPORT_LOG_LEVEL": settings.logs.level,
            "MODELPORT_HOME": str(settings.store.home),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        }
    )
    if settings.grpc.port is not None and settings.grpc.host is not None:
        # Every worker listens on the gRPC port too (SO_REUSEPORT, as for HTTP).
        os.environ["MODELPORT_GRPC_PORT"] = str(settings.grpc.port)
        os.environ["MODELPORT_GRPC_HOST"] = settings.grpc.host
    scheme = "https" if "ssl_certfile" in options else "http"
    announcement = (
        f"modelport serving on {scheme}://{options['host']}:{options['port']}"
        f"{grpc_announcement(settings)} with {settings.workers} workers "
        f"(home: {settings.store.home})"
    )
    try:
        if reuse_port_supported():
            bound_socket(options["host"], options["port"]).close()  # in use: fail here
            app.terminal.info(announcement)
            Supervisor(settings.workers, options).run()
        else:  # one shared socket: uvicorn's own workers
            app.terminal.info(announcement)
            uvicorn.run(APP, factory=True, workers=settings.workers, **options)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
