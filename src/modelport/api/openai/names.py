"""What a ``/v1`` request's ``model`` names.

- ``owner/name``: a registry model at its default version;
- ``owner/name:version``: that version (a version string, or an alias as ``/v2`` takes);
- ``owner/name@alias``: the version the alias points at;
- ``name`` (no ``/``): an endpoint; its active deployment chooses the version.

The two forms never overlap: a model is always named with its owner (``owner/name``)
and an endpoint's name cannot hold a ``/`` (``serving.endpoints.spec``), so the
slash alone decides. A name that cannot exist in either form is 404
``model_not_found``, as OpenAI answers for a model it does not have.
"""

from __future__ import annotations

from modelport.errors import NotFound, Unprocessable
from modelport.inference.types import EndpointTarget, ModelTarget, Target
from modelport.registry.names import ALIAS_RE, NAME_RE, VERSION_RE
from modelport.serving.backends.base import STREAMING_UNSUPPORTED
from modelport.serving.endpoints.spec import ENDPOINT_NAME_RE

MAX_MODEL_NAME = 512


def target_of(model: str) -> Target:
    """The target ``model`` names (see the module docstring)."""
    if len(model) > MAX_MODEL_NAME:
        raise _not_found(model[:64] + "...")
    if "/" not in model:
        if not ENDPOINT_NAME_RE.match(model):
            raise _not_found(model)
        return EndpointTarget(model)
    owner, _, rest = model.partition("/")
    version: str | None = None
    if "@" in rest:
        rest, _, version = rest.partition("@")
        valid = ALIAS_RE.match(version) is not None
    elif ":" in rest:
        rest, _, version = rest.partition(":")
        valid = VERSION_RE.match(version) is not None
    else:
        valid = True
    if not (valid and NAME_RE.match(owner) and NAME_RE.match(rest)):
        raise _not_found(model)
    return ModelTarget(owner, rest, version)


def name_of(target: Target) -> str:
    """The name ``target`` is called by (``target_of``'s inverse, ``:`` for a version)."""
    if isinstance(target, EndpointTarget):
        return target.name
    base = f"{target.owner}/{target.name}"
    return base if target.version is None else f"{base}:{target.version}"


def v2_path(target: Target) -> str:
    """Where ``target`` answers on the Open Inference Protocol surface (``/v2``)."""
    if isinstance(target, EndpointTarget):
        return f"/v2/models/{target.name}/infer"
    base = f"/v2/models/{target.owner}/{target.name}"
    return f"{base}/infer" if target.version is None else f"{base}/versions/{target.version}/infer"


def not_a_text_model(model: str, target: Target) -> Unprocessable:
    """The refusal of a ``/v1`` text call (streamed or not) of a tensor model, naming
    the surface that serves it."""
    return Unprocessable(
        f"'{model}' is a tensor model: it answers tensors, not text; call it with the "
        f"Open Inference Protocol on /v2 (POST {v2_path(target)})",
        code=STREAMING_UNSUPPORTED,
        param="model",
    )


def _not_found(model: str) -> NotFound:
    return NotFound(
        f"The model '{model}' does not exist: a model is named owner/name "
        "(optionally :version or @alias), an endpoint by its name alone",
        code="model_not_found",
        param="model",
    )
