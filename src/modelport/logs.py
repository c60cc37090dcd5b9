"""The platform's logs: lifecycle events as structured records, the request id on each,
and the one configuration of the process's logging (text or JSON lines).

- ``log_event(logger, "version.published", model=..., version=...)`` logs one lifecycle event
  at INFO (or ``level``): the message is the event and its fields as ``key=value``; the
  fields also travel on the record (``record.event``, ``record.fields``) for the JSON
  format. A field whose name says it holds a secret is never written (``[redacted]``).
- ``REQUEST_ID``: the request id of the request being served (set by the request context
  middleware and the inference lane); every record carries it as ``request_id``, and,
  inside a span (tracing on), the span's ``trace_id`` and ``span_id`` (hex, as W3C
  ``traceparent`` writes them; ``-`` outside one), so a log line, a trace and a
  prediction record join.
- ``configure(format, level)``: called once at start-up by the serving commands
  (``MODELPORT_LOG_FORMAT=text|json``, ``MODELPORT_LOG_LEVEL``); uvicorn's loggers go
  through the same handler.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, Any, Literal

from opentelemetry import trace

LogFormat = Literal["text", "json"]
REQUEST_ID: ContextVar[str | None] = ContextVar("modelport_request_id", default=None)
_SECRET_WORDS = ("secret", "password", "token", "api_key", "credential", "authorization")
_HANDLER_NAME = "modelport"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s%(trace_ids)s] %(message)s"


def _safe(name: str, value: Any) -> Any:
    lowered = name.lower()
    return "[redacted]" if any(word in lowered for word in _SECRET_WORDS) else value


def log_event(
    logger: logging.Logger, name: str, /, *, level: int = logging.INFO, **fields: Any
) -> None:
    """Log the lifecycle event ``name`` (``noun.verb``) with its ``fields``."""
    if not logger.isEnabledFor(level):
        return
    safe = {key: _safe(key, value) for key, value in fields.items()}
    text = " ".join(f"{key}={_text(value)}" for key, value in safe.items())
    logger.log(level, "%s %s", name, text, extra={"event": name, "fields": safe})


def _text(value: Any) -> str:
    rendered = str(value)
    return json.dumps(rendered) if not rendered or any(c in rendered for c in ' "=') else rendered


class RequestIdFilter(logging.Filter):
    """Puts the current request's id (or ``-``) on every record as ``request_id``, and
    the current span's ids (or ``-``) as ``trace_id`` and ``span_id``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get() or "-"
        if not hasattr(record, "trace_id"):
            context = trace.get_current_span().get_span_context()
            trace_id = span_id = "-"
            if context.is_valid:
                trace_id = format(context.trace_id, "032x")
                span_id = format(context.span_id, "016x")
            record.trace_id, record.span_id = trace_id, span_id
            record.trace_ids = "" if trace_id == "-" else f" trace={trace_id} span={span_id}"
        elif not hasattr(record, "trace_ids"):
            record.trace_ids = ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message``,
    ``request_id``, ``trace_id`` and ``span_id`` (inside a span), the event and its
    fields when the record is one, ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or REQUEST_ID.get(),
        }
        trace_id = getattr(record, "trace_id", None)
        if trace_id and trace_id != "-":
            doc["trace_id"] = trace_id
            doc["span_id"] = getattr(record, "span_id", None)
        name = getattr(record, "event", None)
        if name is not None:
            doc["event"] = name
            doc.update({k: v for k, v in getattr(record, "fields", {}).items() if k not in doc})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def unconfigure() -> None:
    """Remove the handler ``configure`` installed (tests)."""
    root = logging.getLogger()
    for existing in list(root.handlers):
        if existing.get_name() == _HANDLER_NAME:
            root.removeHandler(existing)


def formatter(fmt: LogFormat) -> logging.Formatter:
    return JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)


def configure(fmt: LogFormat = "text", level: str = "INFO", stream: IO[str] | None = None) -> None:
    """Send every log record of the process to ``stream`` (standard error) in ``fmt``,
    from ``level`` up. Safe to call again (it replaces its own handler, leaves others
    alone)."""
    unconfigure()
    root = logging.getLogger()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(RequestIdFilter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        # Through the handler above (uvicorn is started without a log config of its own).
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
