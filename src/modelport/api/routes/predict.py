"""``POST /api/endpoints/{name}:predict``: one prediction through an endpoint.

The request path: authenticate; find the endpoint in the routing snapshot (no
database read); ``model.call`` in its tenant (another tenant: 404); decode and
check the body against the endpoint's schema (``predict_codec``); with an
``Idempotency-Key``, claim it or replay the first answer; choose the version
(weights, or sticky by ``X-Subject-Key`` / ``subject``); rate, concurrency and
budget limits for that version's model; meter (the usage event names the
version that actually answered); run it through the dispatcher; answer. A caller
that hangs up once its body is read cancels the call: it is metered ``cancelled``
and its idempotency key is freed (``api.disconnect``).

The response::

    {"prediction_id": "...", "endpoint": "fraud", "deployment": 7,
     "model": "acme/fraud", "model_version": "4", "backend": "local",
     "outputs": ..., "fallback": null}

``fallback`` is set when the chosen version could not answer and the endpoint's
fallback chain did: ``{"kind": "version" | "cache" | "static", "reason": code,
"chosen": "acme/fraud:4"}``; ``model``/``model_version`` then name what answered.
A replayed answer carries ``Idempotent-Replayed: true``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
import orjson
from fastapi import APIRouter, Request, Response
from starlette.routing import BaseRoute
from starlette.routing import Route as HttpRoute

from modelport.api.auth import require_principal_async
from modelport.api.deps import get_services
from modelport.api.disconnect import CLIENT_CLOSED, CallerWatch
from modelport.api.limiting import admitted
from modelport.api.metering import call_info
from modelport.api.prediction_records import log_prediction
from modelport.api.routes.endpoints import require_endpoint
from modelport.api.routes.predict_codec import PredictRequest, encode_outputs, parse_predict
from modelport.api.v2.options import TIMEOUT_HEADER, model_parameters, priority_of, timeout_seconds
from modelport.errors import InvalidInput, ModelportError
from modelport.serving.idempotency import Claim, Replay
from modelport.serving.plane import ServingPlane
from modelport.serving.routing.router import Plan, Prediction
from modelport.serving.routing.table import Route
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal

router = APIRouter(tags=["endpoints"])
SUBJECT_HEADER = "x-subject-key"
IDEMPOTENCY_HEADER = "idempotency-key"
JSON = "application/json"


# Declared for /api/openapi.json only: requests are served by ``routes`` (matched first).
@router.post(
    "/endpoints/{name}:predict",
    summary="Predict through an endpoint",
    description=(
        "One prediction by the endpoint's active deployment. Body: `inputs` as a list of "
        "Open Inference Protocol tensors or an object of nested arrays by input name; "
        "optional `outputs`, `subject`, `id`, `parameters`. Headers: `X-Subject-Key`, "
        "`Idempotency-Key`, `Inference-Timeout`."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {JSON: {"schema": {"type": "object", "required": ["inputs"]}}},
        }
    },
)
async def predict(name: str, request: Request) -> Response:
    return await _predict(name, request)


async def _serve(request: Request) -> Response:
    return await _predict(request.path_params["name"], request)


routes: list[BaseRoute] = [HttpRoute("/api/endpoints/{name}:predict", _serve, methods=["POST"])]
"""Put in front of the application's routes, as the ``/v2`` ones are: matching a request
against the whole ``/api`` table costs more than routing it to a version."""


async def _predict(name: str, request: Request) -> Response:
    principal = await require_principal_async(request)
    plane: ServingPlane = get_services(request).serving
    route = await plane.route(name)
    require_endpoint(request, principal, route.endpoint, Permission.MODEL_CALL)
    route.check_active()
    body = await request.body()
    # From here a caller that hangs up cancels the call (see ``api.disconnect``).
    watch = CallerWatch(request.receive)
    try:
        return await _predict_body(name, request, principal, plane, route, body, watch)
    except asyncio.CancelledError:
        if not watch.caller_gone():
            raise  # not the caller's doing (the server is stopping)
        return Response(status_code=CLIENT_CLOSED)
    finally:
        watch.stop()


async def _predict_body(
    name: str,
    request: Request,
    principal: Principal,
    plane: ServingPlane,
    route: Route,
    body: bytes,
    watch: CallerWatch,
) -> Response:
    settings = get_services(request).settings
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    parsed = parse_predict(
        doc, route.inputs, route.outputs, max_elements=settings.max_tensor_elements
    )
    timeout = min(
        route.endpoint.deadline_ms / 1000,
        timeout_seconds(request.headers.get(TIMEOUT_HEADER), parsed.parameters, float("inf")),
    )
    deadline = time.monotonic() + timeout
    subject = request.headers.get(SUBJECT_HEADER) or parsed.subject
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return await _run(
            request, principal, plane, route, parsed, subject, timeout, deadline, watch
        )
    tenant = principal.tenant or principal.id
    fingerprint = hashlib.sha256(f"{subject or ''}\0".encode() + body).hexdigest()
    claimed = await plane.idempotency.claim(
        tenant, name, key, fingerprint, hold_seconds=timeout + 5.0, wait_until=deadline
    )
    if isinstance(claimed, Replay):
        return Response(
            claimed.body, claimed.status, media_type=JSON, headers={"Idempotent-Replayed": "true"}
        )
    return await _run_once(
        request, principal, plane, route, parsed, subject, timeout, deadline, claimed, watch
    )


async def _run_once(
    request: Request,
    principal: Principal,
    plane: ServingPlane,
    route: Route,
    parsed: PredictRequest,
    subject: str | None,
    timeout: float,
    deadline: float,
    claim: Claim,
    watch: CallerWatch,
) -> Response:
    try:
        response = await _run(
            request, principal, plane, route, parsed, subject, timeout, deadline, watch
        )
    except BaseException:
        # Nothing was answered: a retry with the key runs again. Shielded, so that a
        # caller who went away (cancellation) still frees the key.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(plane.idempotency.release, claim)
        raise
    await anyio.to_thread.run_sync(
        plane.idempotency.complete, claim, response.status_code, bytes(response.body)
    )
    return response


async def _run(
    request: Request,
    principal: Principal,
    plane: ServingPlane,
    route: Route,
    parsed: PredictRequest,
    subject: str | None,
    timeout: float,
    deadline: float,
    watch: CallerWatch,
) -> Response:
    plan = plane.router.plan(route.endpoint.name, subject)
    chosen = plan.version
    priority = priority_of(parsed.parameters) if "priority" in parsed.parameters else None
    received_at = datetime.now(UTC)
    started = time.perf_counter()
    async with (
        admitted(request, principal, chosen.model),
        get_services(request).metering.meter.metered(
            call_info(
                request,
                chosen.model,
                chosen.version,
                chosen.manifest_digest,
                timeout,
                endpoint=route.endpoint.name,
            )
        ) as call,
    ):
        try:
            prediction = await plane.router.predict(
                plan,
                parsed.inputs,
                deadline=deadline,
                priority=priority,
                outputs=parsed.outputs,
                parameters=model_parameters(parsed.parameters),
                prediction_id=call.prediction_id,
                call_id=call.reservation.id if call.reservation is not None else "",
            )
            watch.stop()  # answered: billed as such, whoever reads it
        except ModelportError as exc:
            _log(request, plan, call.prediction_id, parsed, None, received_at, started, exc.code)
            raise
        ran = prediction.version
        if ran is not None and ran.ref != chosen.ref:
            call.ran_version(ran.model, ran.version, ran.manifest_digest)
        call.record(compute_seconds=_compute_share(prediction, parsed))
    _log(request, plan, prediction.id, parsed, prediction, received_at, started, "ok")
    return Response(orjson.dumps(_answer(prediction, parsed)), media_type=JSON)


def _log(
    request: Request,
    plan: Plan,
    prediction_id: str,
    parsed: PredictRequest,
    prediction: Prediction | None,
    received_at: datetime,
    started: float,
    status: str,
) -> None:
    """Queue the prediction-log record (never waits; a full log counts the drop)."""
    endpoint = plan.route.endpoint
    log_prediction(
        request,
        prediction_id=prediction_id,
        endpoint=endpoint.name,
        owner=endpoint.tenant,
        chosen=plan.version,
        provenance=None if prediction is None else prediction.provenance,
        inputs=parsed.inputs,
        outputs=None if prediction is None else prediction.outputs,
        received_at=received_at,
        latency_seconds=time.perf_counter() - started,
        stages={} if prediction is None else prediction.timings,
        status=status,
        arm=plan.arm,
        policy=endpoint.log_policy,
    )


def _compute_share(prediction: Prediction, parsed: PredictRequest) -> float:
    """This request's rows' share of its batch's execution time."""
    execute = float(prediction.timings.get("execute", 0.0))
    first = next(iter(parsed.inputs.values()), None)
    rows = first.shape[0] if first is not None and first.ndim else 1
    batch = prediction.batch_size or 0
    return execute * min(1.0, rows / batch) if batch > 0 else execute


def _answer(prediction: Prediction, parsed: PredictRequest) -> dict[str, Any]:
    provenance = prediction.provenance
    ran = provenance.version
    body: dict[str, Any] = {
        "prediction_id": prediction.id,
        "endpoint": prediction.endpoint,
        "deployment": prediction.deployment,
        "model": None if ran is None else ran.model,
        "model_version": None if ran is None else ran.version,
        "backend": provenance.backend,
        "outputs": encode_outputs(parsed.form, prediction.outputs),
        "fallback": None,
    }
    if parsed.id is not None:
        body["id"] = parsed.id
    if provenance.fallback is not None:
        body["fallback"] = {
            "kind": provenance.fallback.value,
            "reason": provenance.reason,
            "chosen": prediction.chosen.ref,
            "age_seconds": provenance.age_seconds,
        }
    return body
