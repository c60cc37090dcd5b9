"""``POST /api/endpoints/{name}:predict``: one prediction through an endpoint.

The request path is ``InferenceService.call_endpoint``'s: authenticate; find the
endpoint in the routing snapshot (no database read); ``model.call`` in its tenant
(another tenant: 404); decode and check the body against the endpoint's schema
(``predict_codec``, this route's part); with an ``Idempotency-Key``, claim it or
replay the first answer; choose the version (weights, or sticky by ``X-Subject-Key``
/ ``subject``); rate, concurrency and budget limits for that version's model; meter
(the usage event names the version that actually answered); run it through the
dispatcher; answer. A caller that hangs up once its body is read cancels the call:
it is metered ``cancelled`` and its idempotency key is freed (``api.disconnect``).

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

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from starlette.routing import BaseRoute
from starlette.routing import Route as HttpRoute

from modelport.api import deps
from modelport.api.auth import require_principal_async
from modelport.api.calls import answered, caller_of
from modelport.api.disconnect import CLIENT_CLOSED, CallerWatch
from modelport.api.openapi import problems
from modelport.api.routes.predict_codec import PredictRequest, encode_outputs, parse_predict
from modelport.api.v2.options import TIMEOUT_HEADER, model_parameters, priority_of, timeout_seconds
from modelport.errors import InvalidInput
from modelport.inference.types import (
    Caller,
    EndpointTarget,
    InferenceRequest,
    InferenceResult,
    Replayed,
)
from modelport.manifest import TensorSpec
from modelport.serving.routing.router import Prediction

router = APIRouter(tags=["endpoints"])
SUBJECT_HEADER = "x-subject-key"
IDEMPOTENCY_HEADER = "idempotency-key"
JSON = "application/json"


class FallbackInfo(BaseModel):
    kind: str = Field(description="`version`, `cache` or `static`")
    reason: str | None
    chosen: str | None = Field(description="The version first chosen")
    age_seconds: float | None = Field(description="For `cache`: the answer's age")


class PredictAnswer(BaseModel):
    """One prediction and where it came from."""

    prediction_id: str = Field(description="For `GET /api/predictions/{id}` and outcomes")
    endpoint: str
    deployment: str | None
    model: str | None = Field(description="`owner/name` of the version that answered")
    model_version: str | None
    backend: str | None
    outputs: list[dict[str, Any]] | dict[str, Any] = Field(
        description="Open Inference Protocol tensors, or an object of nested arrays by "
        "output name: the form the inputs were given in"
    )
    fallback: FallbackInfo | None = Field(description="Set when a fallback step answered")
    id: str | None = Field(default=None, description="The request's `id`, when it had one")


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
    response_model=PredictAnswer,
    responses=problems(402, 503, 504),
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
    caller = caller_of(request, await require_principal_async(request))
    decoder = _Decoder(request, caller, deps.settings_service(request).requests.max_tensor_elements)
    call = deps.inference_service(request).call_endpoint(
        caller, EndpointTarget(name), decoder.decode, encode=decoder.encode
    )
    outcome = await answered(request, caller, call)
    if outcome is None:
        return Response(status_code=CLIENT_CLOSED)
    if isinstance(outcome, Replayed):
        replayed = {"Idempotent-Replayed": "true"}
        return Response(outcome.body, outcome.status, media_type=JSON, headers=replayed)
    body = outcome.body if outcome.body is not None else decoder.encode(outcome)
    return Response(body, media_type=JSON)


class _Decoder:
    """The ``:predict`` decoding of one request, for the service to call once it found
    the endpoint: read the body, watch the caller from then on, parse and check it."""

    def __init__(self, request: Request, caller: Caller, max_elements: int) -> None:
        self.request = request
        self.caller = caller
        self.max_elements = max_elements
        self.parsed: PredictRequest

    async def decode(
        self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
    ) -> InferenceRequest:
        request = self.request
        body = await request.body()
        # From here a caller that hangs up cancels the call (see ``api.disconnect``).
        self.caller.watch = CallerWatch(request.receive)
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise InvalidInput(
                f"request body is not valid JSON: {exc}", code="invalid_json"
            ) from None
        parsed = self.parsed = parse_predict(doc, inputs, outputs, max_elements=self.max_elements)
        parameters = parsed.parameters
        # 0 stands for "none given" (a given timeout is above 0): the endpoint's deadline.
        timeout = timeout_seconds(request.headers.get(TIMEOUT_HEADER), parameters, 0.0)
        subject = request.headers.get(SUBJECT_HEADER) or parsed.subject
        key = request.headers.get(IDEMPOTENCY_HEADER)
        fingerprint = hashlib.sha256(f"{subject or ''}\0".encode() + body).hexdigest()
        return InferenceRequest(
            parsed.inputs,
            model_parameters(parameters),
            parsed.outputs,
            timeout or None,
            priority_of(parameters) if "priority" in parameters else None,
            subject,
            None if key is None else (key, fingerprint),
        )

    def encode(self, result: InferenceResult) -> bytes:
        assert result.prediction is not None
        return orjson.dumps(_answer(result.prediction, self.parsed))


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
        "outputs": encode_outputs(parsed.form, prediction.outputs, parsed.declared),
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
