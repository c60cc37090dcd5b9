"""Step 1, resolve: what the call names, as its caller may see it.

A version: ``owner/name`` at a version or alias (``VersionTargets``, cached). Who may not
see the model gets the very 404 of a model that does not exist, so that check comes
first (``inference.access.require_model``). An endpoint: its route, only in its own
tenant (404 for others), and only with an active deployment (503
``no_active_deployment``); which of its versions runs is chosen once the request is
read (``read.choose``: a canary's subject is in the request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.inference.access import require_endpoint, require_model
from modelport.inference.call import Call, Mode
from modelport.inference.types import Caller, EndpointTarget, ModelTarget
from modelport.serving.routing.table import Route
from modelport.serving.types import VersionRef
from modelport.tenancy.policy import Permission

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def resolve(env: Env, call: Call) -> None:
    target = call.target
    if isinstance(target, ModelTarget):
        call.caller.about = target.owner
        await require_model(
            env.facts, call.caller.principal, target.owner, target.name, Permission.MODEL_CALL
        )
        resolved = await env.targets.target(target.owner, target.name, target.version)
        call.resolved = resolved
        call.ref = resolved.ref
        if call.mode is Mode.STREAM:
            call.task = task_of(resolved.ref)
        return
    assert isinstance(target, EndpointTarget)
    route = await endpoint_route(env, call.caller, target.name, Permission.MODEL_CALL)
    route.check_active()
    call.route = route
    call.endpoint = route.endpoint.name


async def endpoint_route(env: Env, caller: Caller, name: str, permission: Permission) -> Route:
    """The endpoint's route, if ``caller`` may do ``permission`` on it (404 outside its
    tenant, 403 without the permission)."""
    route = await env.serving.route(name)
    caller.about = route.endpoint.tenant
    require_endpoint(caller.principal, route.endpoint, permission)
    return route


def task_of(version: VersionRef) -> str:
    """The model's task as its manifest declares it (``runtime.task``), '' if not."""
    task = version.manifest.runtime.get("task")
    return str(task) if task else ""
