"""How every command fails: one line on stderr that says what to check, a non-zero exit;
the traceback only with ``modelport --debug``. Implemented once, by the top group."""

from __future__ import annotations

from typing import Any

import click
import httpx
from rich.markup import escape

from modelport.cli.terminal import Terminal
from modelport.client.errors import ApiError, ClientError, ConfigurationError, ConnectionFailed
from modelport.client.transport import connection_failed, normalize_url
from modelport.client.types import report_problems

EXIT_API = 1
EXIT_UNREACHABLE = 3
"""Nothing answered, or the URL cannot work: a script can tell it from a refusal."""


def one_line(exc: BaseException, url: str) -> tuple[str, int] | None:
    """The message and exit code for a failure the user must fix, or None for a bug."""
    if isinstance(exc, httpx.TransportError):
        exc = connection_failed(url, exc)
    if isinstance(exc, ApiError):
        return f"{exc.code}: {exc.detail}", EXIT_API
    if isinstance(exc, ConnectionFailed | ConfigurationError):
        return exc.message, EXIT_UNREACHABLE
    if isinstance(exc, ClientError):
        return exc.message, EXIT_API
    if isinstance(exc, httpx.InvalidURL):
        return f"the server URL {url!r} is not a URL ({exc}); check --url or MODELPORT_URL", (
            EXIT_UNREACHABLE
        )
    return None


class PoliteGroup(click.Group):
    """A group whose commands' client and network failures print one line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            app = ctx.obj
            debug = bool(getattr(app, "debug", False))
            url = _shown_url(str(getattr(app, "raw_url", "")))
            failure = one_line(exc, url)
            if failure is None or debug:
                raise
            message, code = failure
            terminal = Terminal()
            terminal.err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
            for line in _details(exc):
                terminal.err.print(f"  - {line}", markup=False, highlight=False)
            raise SystemExit(code) from None


def _shown_url(raw: str) -> str:
    try:
        return normalize_url(raw)
    except ClientError:
        return raw


def _details(exc: BaseException) -> list[str]:
    """The lines a problem carries beyond its detail: a failed validation's problems,
    but not the one its detail already says (a validation that could not run)."""
    report = exc.body.get("report") if isinstance(exc, ApiError) else None
    if not isinstance(report, dict):
        return []
    said = str(exc.detail) if isinstance(exc, ApiError) else ""
    detail = report.get("detail")
    return [
        line
        for line in report_problems(report)
        if not (isinstance(detail, str) and detail and line.endswith(detail) and detail in said)
    ]
