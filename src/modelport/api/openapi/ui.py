"""The API's browsable docs, Swagger UI at ``/api/docs`` and ReDoc at ``/api/redoc``, with
their scripts and styles served from the installed ``fastapi-offline`` package (Swagger
UI 5, ReDoc 2): nothing is loaded from a CDN, so they work on an air-gapped install.
Swagger UI's OAuth2 redirect page is served too, at ``/api/docs/oauth2-redirect``."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_URL = "/api/docs"
REDOC_URL = "/api/redoc"
OAUTH2_REDIRECT_URL = f"{DOCS_URL}/oauth2-redirect"
ASSETS_URL = f"{DOCS_URL}/assets"
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def assets_dir() -> Path:
    """The folder of the packaged Swagger UI and ReDoc files."""
    return Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI, openapi_url: str) -> None:
    """Serve the docs pages of ``openapi_url`` and their assets on ``app``."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} API",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={"persistAuthorization": True},
        )

    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} API",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    app.add_api_route(DOCS_URL, swagger_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route(
        OAUTH2_REDIRECT_URL, oauth2_redirect, methods=["GET"], include_in_schema=False
    )
    app.add_api_route(REDOC_URL, redoc, methods=["GET"], include_in_schema=False)
