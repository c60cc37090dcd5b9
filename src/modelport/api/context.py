"""Per-request context: the request id, and the audit record of the request's outcome,
as the envelope (``api.envelope``) applies them to every request:

- honours a well-formed ``X-Request-Id`` or makes one, puts it on
  ``request.state.request_id`` and on the request's log records (``logs.REQUEST_ID``),
  and returns it on every response;
- writes one audit event for each authenticated mutating request (``POST``, ``PUT``,
  ``PATCH``, ``DELETE`` on ``/api`` or ``/v2``, but not inference calls), whatever
  its outcome, and for every 403 on any method. The event is committed before the
  response starts, so a client that saw the response finds the event in the log.

Routes may refine the event through ``request.state``: ``audit_action``,
``audit_tenant`` (set by ``modelport.api.access``) and ``audit_reason``.
Unauthenticated requests are not audited: there is nobody to attribute them to.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import anyio.to_thread
from starlette.types import Scope

from modelport.ids import unique_id
from modelport.tenancy.audit import NewAuditEvent
from modelport.tenancy.types import Principal

REQUEST_ID_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:+=/-]{1,128}$")
_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_log = logging.getLogger(__name__)


def request_id_of(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1")
            if _REQUEST_ID.match(candidate):
                return candidate
            break
    return unique_id()


def is_inference(path: str) -> bool:
    return (path.startswith("/v2/") and path.endswith("/infer")) or path.endswith(":predict")


def should_audit(method: str, path: str, status: int) -> bool:
    if not path.startswith(("/api/", "/v2/")):
        return False
    if status == 403:
        return True
    return method in _MUTATING and not is_inference(path)


def action_of(scope: Scope, state: dict[str, Any]) -> str:
    if state.get("audit_action"):
        return str(state["audit_action"])
    endpoint = scope.get("endpoint")
    name = getattr(endpoint, "__name__", "unknown")
    area = "v2" if scope["path"].startswith("/v2/") else str(getattr(endpoint, "__module__", ""))
    return f"{area.rsplit('.', 1)[-1]}.{name}"


def target_tenant(scope: Scope, state: dict[str, Any]) -> str | None:
    if state.get("audit_tenant"):
        return str(state["audit_tenant"])
    params = scope.get("path_params") or {}
    for key in ("tenant", "owner"):
        if isinstance(params.get(key), str):
            return str(params[key])
    return None


async def audit_outcome(scope: Scope, state: dict[str, Any], status: int) -> None:
    """Write the audit event of a request that ended with ``status``, where one is due
    (see the module docstring); committed before it returns."""
    principal = state.get("principal")
    if not isinstance(principal, Principal):
        return
    method, path = scope["method"], scope["path"]
    if not should_audit(method, path, status):
        return
    event = NewAuditEvent(
        actor=principal.id,
        actor_tenant=principal.tenant,
        key_id=principal.key_id,
        action=action_of(scope, state),
        method=method,
        target=path,
        tenant=target_tenant(scope, state),
        status=status,
        reason=str(state.get("audit_reason") or ""),
        request_id=state["request_id"],
    )
    services = scope["app"].state.services
    try:
        await anyio.to_thread.run_sync(services.tenancy.record, event)
    except Exception:  # the action itself already happened; do not hide its outcome
        _log.exception("could not write the audit event %s", event)
