"""Parse ``owner/name[:version]`` arguments into API paths."""

from __future__ import annotations

from urllib.parse import quote

from modelport.cli.application import Application
from modelport.errors import InvalidInput
from modelport.registry.names import split_version_ref


def _split(app: Application, ref: str) -> tuple[str, str, str | None]:
    try:
        return split_version_ref(ref)
    except InvalidInput as exc:
        app.terminal.abort(exc.message)


def model_path(app: Application, ref: str) -> str:
    """``owner/name`` -> ``/api/models/owner/name``."""
    owner, name, version = _split(app, ref)
    if version is not None:
        app.terminal.abort(f"expected owner/name, got {ref!r}")
    return f"/api/models/{owner}/{name}"


def version_path(app: Application, ref: str) -> str:
    """``owner/name:version`` -> ``/api/models/owner/name/versions/version``."""
    owner, name, version = _split(app, ref)
    if not version:
        app.terminal.abort(f"expected owner/name:version, got {ref!r}")
    return f"/api/models/{owner}/{name}/versions/{quote(version, safe='')}"
